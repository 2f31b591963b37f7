// The answer to every request while the model loads: the server listens
// before the engine exists (Server::start, then Server::attach), so a port in
// use is found at once and load balancers see the load in progress.
#pragma once

#include <string_view>

#include "http/http_types.h"

namespace pagoda::openai {

// Seconds a client is told to wait (Retry-After) before asking again.
inline constexpr int kLoadingRetryAfterSeconds = 5;

// GET /health: 503 with llama-server's body, {"error": {"code": 503, "message":
// "Loading model", "type": "unavailable_error"}}, never needing the API key.
// Any other request: 401 without the API key (`api_key` "" → none needed),
// else 503 "model is loading" (code model_loading). Both carry Retry-After.
http::HttpResponse loading_response(const http::HttpRequest& request, std::string_view api_key);

}  // namespace pagoda::openai
