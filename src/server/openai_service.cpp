#include "server/openai_service.h"

#include "server/auth.h"

namespace pagoda::server {

OpenAiService::OpenAiService(std::unique_ptr<ServiceContext> context)
    : context_(std::move(context)) {
  ServiceContext* ctx = context_.get();
  auto bind = [ctx](void (*fn)(ServiceContext&, const HttpRequest&, std::shared_ptr<Responder>)) {
    return [ctx, fn](const HttpRequest& request, std::shared_ptr<Responder> responder) {
      fn(*ctx, request, std::move(responder));
    };
  };
  router_.add("POST", "/v1/completions", bind(handle_completions));
  router_.add("POST", "/v1/chat/completions", bind(handle_chat_completions));
  router_.add("GET", "/v1/models", bind(handle_models));
  router_.add_prefix("GET", "/v1/models/", bind(handle_model));
  router_.add("POST", "/tokenize", bind(handle_tokenize));
  router_.add("POST", "/detokenize", bind(handle_detokenize));
  router_.add("GET", "/health", bind(handle_health));
  router_.add("GET", "/version", bind(handle_version));
  router_.add("GET", "/metrics", bind(handle_metrics));
}

void OpenAiService::handle(const HttpRequest& request, std::shared_ptr<Responder> responder) {
  const bool is_health = request.path == "/health";
  if (!is_health && !is_authorized(request.header("authorization"), context_->options.api_key)) {
    HttpResponse response = error_response(
        ApiError{401, "Incorrect or missing API key: send `Authorization: Bearer <key>`.", "",
                 "invalid_api_key"});
    response.headers.emplace_back("WWW-Authenticate", "Bearer");
    responder->send(std::move(response));
    return;
  }
  if (context_->draining && request.method == "POST") {
    responder->send(error_response(shutting_down_error()));
    return;
  }
  router_.dispatch(request, std::move(responder));
}

}  // namespace pagoda::server
