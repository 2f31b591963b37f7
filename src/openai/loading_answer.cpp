#include "openai/loading_answer.h"

#include <string>

#include "openai/auth.h"
#include "openai/json_response.h"

namespace pagoda::openai {

http::HttpResponse loading_response(const http::HttpRequest& request, std::string_view api_key) {
  http::HttpResponse response;
  if (request.path == "/health" && request.method == "GET") {
    response = json_response(
        503,
        {{"error", {{"code", 503}, {"message", "Loading model"}, {"type", "unavailable_error"}}}});
  } else if (!is_authorized(request.header("authorization"), api_key)) {
    return unauthorized_response();
  } else {
    response = error_response(
        ApiError{503, "model is loading; retry when GET /health answers 200", "", "model_loading"});
  }
  response.headers.emplace_back("Retry-After", std::to_string(kLoadingRetryAfterSeconds));
  return response;
}

}  // namespace pagoda::openai
