// tool_choice "required" or a named function as a structured-output
// constraint on a chat's output (as vLLM builds it), so the output is always
// the call(s) the client asked for:
// - "required": a JSON array of one or more calls (at most one when
//   parallel_tool_calls is false), each {"name": N, "parameters": P} where N
//   is one of the tools' names and P follows that tool's `parameters` schema
//   (an anyOf over the tools). Each tool's $defs / definitions move to the
//   array schema's root, where its "#/$defs/..." references point; two tools
//   defining one name differently are a 400 naming `tools`.
// - a named function: its `parameters` schema itself (the output is the
//   arguments object).
// A tool without parameters takes {"type": "object", "properties": {}}.
// openai/tools/forced_tool_calls.h reads such output back into tool calls.
#pragma once

#include <optional>

#include "openai/api_error.h"
#include "openai/chat_messages.h"
#include "openai/structured_output_request.h"

namespace pagoda::openai {

// The constraint for `tools` (a validated selection) when its mode is
// kRequired or kNamed; nullopt for the other modes.
ApiResult<std::optional<ConstraintSource>> tool_choice_constraint(const ToolSelection& tools,
                                                                  bool parallel_tool_calls);

}  // namespace pagoda::openai
