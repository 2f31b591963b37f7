#include "openai/auth.h"

#include <cctype>

#include "openai/json_response.h"

namespace pagoda::openai {

namespace {

// Leaks only the length, never the position of the first difference.
bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool is_authorized(std::string_view authorization, std::string_view api_key) {
  if (api_key.empty()) return true;
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return false;
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return equal_constant_time(token, api_key);
}

http::HttpResponse unauthorized_response() {
  http::HttpResponse response = error_response(
      ApiError{401, "Incorrect or missing API key: send `Authorization: Bearer <key>`.", "",
               "invalid_api_key"});
  response.headers.emplace_back("WWW-Authenticate", "Bearer");
  return response;
}

}  // namespace pagoda::openai
