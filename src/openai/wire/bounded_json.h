// The one parser for untrusted JSON text: request bodies, tool-call
// `arguments` strings inside them, and tool calls read from model output.
// It never recurses, runs in time linear in the text (duplicate keys are found
// through a hash index, not ordered_json's linear search), and enforces limits
// before any later recursive walk (copies, templates, dumps) can see the value.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/result.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {

struct JsonLimits {
  int max_depth = kMaxJsonDepth;       // deepest array/object nesting
  int64_t max_object_keys = 16384;     // distinct keys of one object
};

// Parses `text` into a Json value. Errors (kInvalidArgument) name the problem
// and, where there is one, the byte offset: invalid UTF-8, a NUL byte, JSON
// syntax, a number outside double's range (1e999), nesting deeper than
// limits.max_depth, an object with more than limits.max_object_keys keys.
// Duplicate keys keep the first key's position and the last value (as
// Python's json does). `what` names the text in messages, e.g. "request body".
Result<Json> parse_bounded_json(std::string_view text, std::string_view what,
                                const JsonLimits& limits = {});

}  // namespace pagoda::openai
