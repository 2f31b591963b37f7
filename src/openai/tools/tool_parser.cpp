#include "openai/tools/tool_parser.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "openai/wire/bounded_json.h"
#include "openai/wire/ids.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace

void ContentHoldBack::add(std::string_view text, std::string& out) {
  size_t end = text.size();
  while (end > 0 && is_space(text[end - 1])) --end;
  if (end == 0) {
    pending_ += text;
    return;
  }
  out += pending_;
  out += text.substr(0, end);
  pending_.assign(text.substr(end));
}

std::optional<ToolCall> parse_tool_call_json(std::string_view text) {
  auto parsed = parse_bounded_json(text, "tool call");
  if (!parsed.ok()) return std::nullopt;
  const Json& value = parsed.value();
  if (!value.is_object() || !value.contains("name") || !value["name"].is_string())
    return std::nullopt;
  ToolCall call;
  call.id = random_id("call_");
  call.name = value["name"].get<std::string>();
  const char* key = value.contains("arguments") ? "arguments" : "parameters";
  const Json args = value.value(key, Json::object());
  if (args.is_string()) {
    call.arguments = args.get<std::string>();
  } else if (args.is_object()) {
    call.arguments = dump_json(args);
  } else {
    return std::nullopt;
  }
  return call;
}

ParsedToolOutput parse_tool_output(const ToolParser& parser, std::string_view text) {
  ParsedToolOutput result;
  auto stream = parser.start();
  for (ToolStreamDelta delta : {stream->feed(text), stream->finish()}) {
    result.content += delta.content;
    for (auto& piece : delta.calls) {
      if (piece.index >= static_cast<int>(result.tool_calls.size())) {
        result.tool_calls.push_back({piece.id, piece.name, ""});
      }
      result.tool_calls[piece.index].arguments += piece.arguments;
    }
  }
  return result;
}

Result<std::unique_ptr<ToolParser>> make_tool_parser(std::string_view name) {
  if (name == "hermes") return make_hermes_tool_parser();
  if (name == "llama3_json") return make_llama3_json_tool_parser();
  return make_error(
      ErrorCode::kInvalidArgument,
      fmt::format("unknown tool-call parser '{}' (expected hermes or llama3_json)", name));
}

std::unique_ptr<ToolParser> detect_tool_parser(std::string_view chat_template) {
  if (chat_template.find("<tool_call>") != std::string_view::npos) return make_hermes_tool_parser();
  const bool llama3 = chat_template.find("<|start_header_id|>") != std::string_view::npos;
  if (llama3 && (chat_template.find("<|python_tag|>") != std::string_view::npos ||
                 chat_template.find("\"parameters\"") != std::string_view::npos)) {
    return make_llama3_json_tool_parser();
  }
  return nullptr;
}

}  // namespace pagoda::openai
