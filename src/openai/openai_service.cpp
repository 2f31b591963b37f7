#include "openai/openai_service.h"

#include <fmt/format.h>

#include "openai/auth.h"
#include "openai/json_response.h"
#include "openai/route_table.h"

namespace pagoda::openai {

namespace {

// The API's routes. Generation and tokenization are drain-gated; /health is
// answered without the API key, for load balancers (it reports the drain
// itself, with a 503).
constexpr Route kRoutes[] = {
    {.method = "POST", .path = "/v1/completions", .drain_gated = true,
     .handler = handle_completions},
    {.method = "POST", .path = "/v1/chat/completions", .drain_gated = true,
     .handler = handle_chat_completions},
    {.method = "GET", .path = "/v1/models", .handler = handle_models},
    {.method = "GET", .path = "/v1/models/", .match = PathMatch::kPrefix, .handler = handle_model},
    {.method = "POST", .path = "/tokenize", .drain_gated = true, .handler = handle_tokenize},
    {.method = "POST", .path = "/detokenize", .drain_gated = true, .handler = handle_detokenize},
    {.method = "GET", .path = "/health", .needs_api_key = false, .handler = handle_health},
    {.method = "GET", .path = "/version", .handler = handle_version},
    {.method = "GET", .path = "/metrics", .handler = handle_metrics},
};

// 404 when no route has the path, else 405 with the methods it allows.
http::HttpResponse miss_response(const http::HttpRequest& request, const std::string& allow) {
  if (allow.empty()) {
    return error_response(ApiError{
        404, fmt::format("no route for {} {}", request.method, request.path), "", "not_found"});
  }
  http::HttpResponse response =
      error_response(ApiError{405,
                              fmt::format("method {} is not allowed on {}; allowed: {}",
                                          request.method, request.path, allow),
                              "", "method_not_allowed"});
  response.headers.emplace_back("Allow", allow);
  return response;
}

}  // namespace

OpenAiService::OpenAiService(std::unique_ptr<ServiceContext> context)
    : context_(std::move(context)) {}

void OpenAiService::handle(const http::HttpRequest& request,
                           std::shared_ptr<http::Responder> responder) {
  const RouteMatch match = match_route(kRoutes, request.method, request.path);
  if (match.needs_api_key &&
      !is_authorized(request.header("authorization"), context_->options.api_key)) {
    return responder->send(unauthorized_response());
  }
  if (match.drain_gated && context_->draining) {
    return responder->send(error_response(shutting_down_error()));
  }
  if (!match.route) return responder->send(miss_response(request, match.allow));
  match.route->handler(*context_, request, std::move(responder));
}

}  // namespace pagoda::openai
