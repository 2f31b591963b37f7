// API-key check: `Authorization: Bearer KEY` (OpenAI clients send this).
#pragma once

#include <string_view>

namespace pagoda::openai {

// True when `authorization` (the header value) is "Bearer <api_key>" (scheme
// case-insensitive). The comparison takes time independent of where the key
// differs. An empty api_key authorizes everything.
bool is_authorized(std::string_view authorization, std::string_view api_key);

}  // namespace pagoda::openai
