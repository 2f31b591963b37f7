// Random identifiers for responses and tool calls ("cmpl-…", "chatcmpl-…",
// "call_…") and response timestamps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::openai {

// Seconds since the Unix epoch ("created" fields).
int64_t unix_seconds();

// prefix + `length` random characters from [0-9a-zA-Z]. Thread-safe.
std::string random_id(std::string_view prefix, int length = 24);

}  // namespace pagoda::openai
