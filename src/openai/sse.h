// Server-sent events framing as OpenAI streams it: one `data: <json>` event per
// chunk, each terminated by a blank line, and a final `data: [DONE]`.
#pragma once

#include <string>

#include "openai/wire/json_util.h"

namespace pagoda::openai {

inline constexpr const char* kSseContentType = "text/event-stream";

// "data: {...}\n\n" (compact JSON, invalid UTF-8 replaced; JSON text never
// contains a raw newline, so one data line per event).
std::string sse_event(const Json& payload);

// "data: [DONE]\n\n"
std::string sse_done();

}  // namespace pagoda::openai
