#include "openai/tools/tool_parser.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "openai/tools/json_value_stream.h"
#include "openai/wire/bounded_json.h"
#include "openai/wire/ids.h"

namespace pagoda::openai {

bool is_json_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

std::string new_tool_call_id() {
  return random_id("call_");
}

void ToolStreamDelta::begin_call(int index, std::string id, std::string name) {
  calls.push_back({index, std::move(id), std::move(name), ""});
}

void ToolStreamDelta::add_arguments(int index, std::string_view text) {
  if (text.empty()) return;
  if (calls.empty() || calls.back().index != index) calls.push_back({index, "", "", ""});
  calls.back().arguments += text;
}

void ToolStreamDelta::append(ToolStreamDelta later) {
  content += later.content;
  for (auto& piece : later.calls) {
    if (piece.id.empty() && !calls.empty() && calls.back().index == piece.index) {
      calls.back().arguments += piece.arguments;
    } else {
      calls.push_back(std::move(piece));
    }
  }
}

void ContentHoldBack::add(std::string_view text, std::string& out) {
  size_t end = text.size();
  while (end > 0 && is_json_space(text[end - 1])) --end;
  if (end == 0) {
    pending_ += text;
    return;
  }
  out += pending_;
  out += text.substr(0, end);
  pending_.assign(text.substr(end));
}

size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t len = std::min(text.size(), tag.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

std::string arguments_from_string(const std::string& text) {
  auto parsed = parse_bounded_json(text, "tool call arguments");
  if (parsed.ok() && parsed.value().is_object()) return normalized_json(dump_json(parsed.value()));
  // Cut off or broken: the object as far as it is valid, closed.
  JsonValueStream stream(/*object_only=*/true);
  std::string out;
  stream.feed(text, out);
  stream.close(out);
  return out.empty() ? "{}" : out;
}

std::optional<ToolCall> parse_tool_call_json(std::string_view text) {
  auto parsed = parse_bounded_json(text, "tool call");
  if (!parsed.ok()) return std::nullopt;
  const Json& value = parsed.value();
  if (!value.is_object() || !value.contains("name") || !value["name"].is_string())
    return std::nullopt;
  ToolCall call;
  call.name = value["name"].get<std::string>();
  const char* key = value.contains("arguments") ? "arguments" : "parameters";
  const Json args = value.value(key, Json::object());
  if (args.is_string()) {
    call.arguments = arguments_from_string(args.get<std::string>());
  } else if (args.is_object()) {
    call.arguments = normalized_json(dump_json(args));
  } else {
    return std::nullopt;
  }
  return call;
}

ParsedToolOutput parse_tool_output(const ToolParser& parser, std::string_view text,
                                   const Json& tools) {
  ParsedToolOutput result;
  auto stream = parser.start(tools);
  ToolStreamDelta all = stream->feed(text);
  all.append(stream->finish());
  result.content = std::move(all.content);
  for (auto& piece : all.calls) {
    if (piece.index >= static_cast<int>(result.tool_calls.size())) {
      result.tool_calls.push_back({piece.id, piece.name, ""});
    }
    result.tool_calls[piece.index].arguments += piece.arguments;
  }
  return result;
}

const std::vector<std::string>& tool_parser_names() {
  static const std::vector<std::string> names = {"hermes",      "llama3_json", "llama4_json",
                                                 "mistral",     "pythonic",    "llama4_pythonic",
                                                 "qwen3_coder", "deepseek_v3", "deepseek_v31"};
  return names;
}

Result<std::unique_ptr<ToolParser>> make_tool_parser(std::string_view name) {
  if (name == "hermes") return make_hermes_tool_parser();
  if (name == "llama3_json" || name == "llama4_json") return make_llama3_json_tool_parser();
  if (name == "mistral") return make_mistral_tool_parser();
  if (name == "pythonic" || name == "llama4_pythonic") return make_pythonic_tool_parser();
  if (name == "qwen3_coder") return make_qwen3_coder_tool_parser();
  if (name == "deepseek_v3") return make_deepseek_v3_tool_parser("deepseek_v3");
  if (name == "deepseek_v31") return make_deepseek_v3_tool_parser("deepseek_v31");
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("unknown tool-call parser '{}' (expected one of: {})", name,
                                fmt::join(tool_parser_names(), ", ")));
}

std::unique_ptr<ToolParser> detect_tool_parser(std::string_view chat_template) {
  auto has = [&](std::string_view s) { return chat_template.find(s) != std::string_view::npos; };
  if (has("<tool_call>")) {
    return has("<function=") ? make_qwen3_coder_tool_parser() : make_hermes_tool_parser();
  }
  if (has("[TOOL_CALLS]")) return make_mistral_tool_parser();
  if (has("<｜tool▁call▁begin｜>")) return make_deepseek_v3_tool_parser();
  const bool llama = has("<|start_header_id|>") || has("<|header_start|>");
  if (llama && has("[func_name1(")) return make_pythonic_tool_parser();
  if (llama && (has("<|python_tag|>") || has("\"parameters\""))) {
    return make_llama3_json_tool_parser();
  }
  return nullptr;
}

}  // namespace pagoda::openai
