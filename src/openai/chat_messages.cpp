#include "openai/chat_messages.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "openai/field_reader.h"
#include "openai/wire/bounded_json.h"

namespace pagoda::openai {

namespace {

constexpr std::array<std::string_view, 6> kRoles = {"system",    "developer", "user",
                                                    "assistant", "tool",      "ipython"};

// obj[key] when obj is an object and the value a string; "" otherwise.
std::string string_at(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

ApiError message_error(const std::string& param, const std::string& what) {
  return invalid_field(param, fmt::format("'{}' {}", param, what));
}

// Content as a string (or null for an assistant message).
ApiResult<Json> normalize_content(const Json& content, const std::string& param, bool null_ok) {
  if (content.is_string()) return content;
  if (content.is_null()) {
    if (null_ok) return content;
    return message_error(param, "must be a string or a list of text parts, got null");
  }
  if (!content.is_array()) {
    return message_error(param, fmt::format("must be a string or a list of content parts, got {}",
                                            describe_value(content)));
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const auto& part = content[i];
    const std::string part_param = fmt::format("{}[{}]", param, i);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return message_error(part_param, "must be an object with a string 'type'");
    }
    const std::string type = part["type"].get<std::string>();
    if (type != "text") {
      return message_error(
          part_param + ".type",
          fmt::format("unsupported content part type '{}': only 'text' is supported", type));
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return message_error(part_param + ".text", "must be a string");
    }
    if (i > 0) text += '\n';
    text += part["text"].get<std::string>();
  }
  return Json(text);
}

ApiResult<Json> normalize_tool_calls(const Json& calls, const std::string& param) {
  if (!calls.is_array())
    return message_error(param, fmt::format("must be an array, got {}", describe_value(calls)));
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    const auto& call = calls[i];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
      return message_error(p, "must be an object with a 'function' object");
    }
    Json fn = call["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      return message_error(p + ".function.name", "must be a string");
    if (fn.contains("arguments") && fn["arguments"].is_string()) {
      // Templates index and tojson the arguments: give them the object.
      // Not JSON, or beyond the limits: the template gets the string as the
      // client sent it.
      auto parsed = parse_bounded_json(fn["arguments"].get<std::string>(), "arguments");
      if (parsed.ok() && parsed->is_object()) fn["arguments"] = std::move(parsed.value());
    }
    Json normalized = call;
    normalized["function"] = std::move(fn);
    if (!normalized.contains("type")) normalized["type"] = "function";
    out.push_back(std::move(normalized));
  }
  return out;
}

ApiResult<Json> normalize_message(const Json& message, size_t index) {
  const std::string param = fmt::format("messages[{}]", index);
  if (!message.is_object())
    return message_error(param, fmt::format("must be an object, got {}", describe_value(message)));
  auto role_it = message.find("role");
  if (role_it == message.end() || !role_it->is_string())
    return message_error(param + ".role", "must be a string");
  std::string role = role_it->get<std::string>();
  if (std::find(kRoles.begin(), kRoles.end(), role) == kRoles.end()) {
    return message_error(
        param + ".role",
        fmt::format("must be one of system, developer, user, assistant, tool, ipython; got '{}'",
                    role));
  }
  Json out = message;
  if (role == "developer") out["role"] = "system";
  const bool assistant = role == "assistant";
  if (message.contains("content")) {
    auto content = normalize_content(message["content"], param + ".content", assistant);
    if (!content.ok()) return content.error();
    out["content"] = std::move(content.value());
  } else if (!assistant) {
    return message_error(param + ".content", "is required");
  }
  if (message.contains("tool_calls") && !message["tool_calls"].is_null()) {
    if (!assistant)
      return message_error(param + ".tool_calls", "is only allowed in assistant messages");
    auto calls = normalize_tool_calls(message["tool_calls"], param + ".tool_calls");
    if (!calls.ok()) return calls.error();
    out["tool_calls"] = std::move(calls.value());
  }
  if (role == "tool" && message.contains("tool_call_id") && !message["tool_call_id"].is_string()) {
    return message_error(param + ".tool_call_id", "must be a string");
  }
  return out;
}

}  // namespace

ApiResult<Json> normalize_messages(const Json& messages) {
  if (!messages.is_array() || messages.empty()) {
    return invalid_field("messages", "'messages' must be a non-empty array of messages");
  }
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    auto message = normalize_message(messages[i], i);
    if (!message.ok()) return message.error();
    out.push_back(std::move(message.value()));
  }
  return out;
}

namespace {

ApiResult<Json> validate_tools(const Json& tools) {
  if (!tools.is_array())
    return invalid_field("tools",
                         fmt::format("'tools' must be an array, got {}", describe_value(tools)));
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = fmt::format("tools[{}]", i);
    const auto& tool = tools[i];
    if (string_at(tool, "type") != "function") {
      return message_error(p + ".type", "must be \"function\"");
    }
    if (!tool.contains("function") || !tool["function"].is_object())
      return message_error(p + ".function", "must be an object");
    const auto& fn = tool["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty()) {
      return message_error(p + ".function.name", "must be a non-empty string");
    }
    if (fn.contains("description") && !fn["description"].is_string() &&
        !fn["description"].is_null()) {
      return message_error(p + ".function.description", "must be a string");
    }
    if (fn.contains("parameters") && !fn["parameters"].is_object() && !fn["parameters"].is_null()) {
      return message_error(p + ".function.parameters", "must be a JSON Schema object");
    }
  }
  return tools;
}

}  // namespace

ApiResult<ToolSelection> select_tools(const Json* tools, const Json* tool_choice) {
  ToolSelection selection;
  if (!tools) {
    if (tool_choice && !(tool_choice->is_string() && *tool_choice == "none")) {
      return invalid_field("tool_choice", "'tool_choice' requires 'tools'");
    }
    return selection;
  }
  auto valid = validate_tools(*tools);
  if (!valid.ok()) return valid.error();
  if (tools->empty()) return selection;
  selection.mode = ToolChoiceMode::kAuto;
  selection.tools = *tools;
  if (!tool_choice) return selection;
  if (tool_choice->is_string()) {
    const std::string choice = tool_choice->get<std::string>();
    if (choice == "none") return ToolSelection{};
    if (choice == "auto") return selection;
    if (choice == "required") {
      selection.mode = ToolChoiceMode::kRequired;
      return selection;
    }
    return invalid_field(
        "tool_choice",
        fmt::format("'tool_choice' must be none, auto, required or a function, got '{}'", choice));
  }
  const bool named = string_at(*tool_choice, "type") == "function" &&
                     tool_choice->contains("function") &&
                     !string_at((*tool_choice)["function"], "name").empty();
  if (!named) {
    return invalid_field("tool_choice",
                         "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
                         "\"function\": {\"name\": ...}}");
  }
  const std::string name = (*tool_choice)["function"]["name"].get<std::string>();
  for (const auto& tool : *tools) {
    if (tool["function"]["name"] == name) {
      selection.mode = ToolChoiceMode::kNamed;
      selection.tools = Json::array({tool});
      return selection;
    }
  }
  return invalid_field(
      "tool_choice",
      fmt::format("'tool_choice' names function '{}', which is not in 'tools'", name));
}

}  // namespace pagoda::openai
