// API-key check: `Authorization: Bearer KEY` (OpenAI clients send this), and
// the 401 answer to a request without it.
#pragma once

#include <string_view>

#include "http/http_types.h"

namespace pagoda::openai {

// True when `authorization` (the header value) is "Bearer <api_key>" (scheme
// case-insensitive). The comparison takes time independent of where the key
// differs. An empty api_key authorizes everything.
bool is_authorized(std::string_view authorization, std::string_view api_key);

// 401 invalid_api_key with `WWW-Authenticate: Bearer`.
http::HttpResponse unauthorized_response();

}  // namespace pagoda::openai
