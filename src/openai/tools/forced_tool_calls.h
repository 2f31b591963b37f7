// Tool calls of a chat whose output was constrained by tool_choice
// (openai/tool_constraint.h) instead of parsed out of free text, whatever the
// server's --tool-call-parser:
// - "required": the output is a JSON array of {"name": N, "parameters": P}
//   objects; each is one call (arguments: P). The call is announced once its
//   parameters start and its arguments stream as they grow (JsonCallReader).
// - a named function: the whole output is that function's arguments object;
//   the call is announced at once and its arguments stream as they grow
//   (JsonValueStream); output cut off before the object starts reads as {}.
// Output that the constraint should have excluded is handled as the text
// parsers handle it: for "required", from the first byte that is not part of
// the array of call objects, the rest is content; for a named function, the
// arguments are closed where the text turns invalid (JsonValueStream::close)
// and the rest is dropped, as after a call whose name was sent.
#pragma once

#include <memory>
#include <string>

#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

std::unique_ptr<ToolParser> make_required_tool_call_parser();
std::unique_ptr<ToolParser> make_named_tool_call_parser(std::string function_name);

}  // namespace pagoda::openai
