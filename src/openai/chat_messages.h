// OpenAI chat `messages`, `tools` and `tool_choice` → what chat templates
// expect (the shapes transformers passes to apply_chat_template).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "openai/api_error.h"

namespace pagoda::openai {

// Validates and normalizes `messages` (a non-empty array):
// - role: system, developer (rendered as system), user, assistant, tool, ipython;
// - content: a string, null (assistant only), or a list of {"type":"text","text"}
//   parts joined with "\n" (as vLLM does); any other part type is a 400;
// - assistant tool_calls: {id?, type "function", function {name, arguments}};
//   arguments given as a JSON string are parsed into an object for templates;
// - tool: tool_call_id (string) is kept; other keys pass through unchanged.
ApiResult<Json> normalize_messages(const Json& messages);

enum class ToolChoiceMode { kNone, kAuto, kRequired, kNamed };

struct ToolSelection {
  ToolChoiceMode mode = ToolChoiceMode::kNone;
  Json tools;  // what the template gets: null (no tools) or an array
};

// Validates `tools` (array of {"type":"function","function":{name, description?,
// parameters?}}) and `tool_choice` ("none" | "auto" | "required" |
// {"type":"function","function":{"name"}}; default "auto" when tools are given).
// "none" renders no tools; a named choice renders only that tool.
ApiResult<ToolSelection> select_tools(const Json* tools, const Json* tool_choice);

}  // namespace pagoda::openai
