// JSON helpers shared by the HTTP handlers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/utf8.h"

namespace pagoda::openai {

// JSON values of the server. Ordered: key order reaches chat templates (a
// tool's parameters rendered with tojson) as it does in Python, and responses
// keep OpenAI's field order.
using Json = nlohmann::ordered_json;

// Serializes compactly for an HTTP body. Never throws: bytes that are not valid
// UTF-8 inside strings (a token may end mid-character) become U+FFFD.
std::string dump_json(const Json& value);

// Deepest array/object nesting a request body may have.
inline constexpr int kMaxJsonDepth = 64;

// Parses a request body with parse_bounded_json (bounded_json.h): its errors,
// or one saying that the body is not a JSON object.
Result<Json> parse_json_object(std::string_view body);

}  // namespace pagoda::openai
