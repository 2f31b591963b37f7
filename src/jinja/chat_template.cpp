#include "jinja/chat_template.h"

#include <new>

#include "jinja/final_message.h"
#include "jinja/globals.h"
#include "jinja/interpreter.h"
#include "jinja/json_value.h"
#include "jinja/parser.h"

namespace pagoda {
namespace {

using nlohmann::ordered_json;

const char* python_error_name(jinja::ErrorKind kind) {
  switch (kind) {
    case jinja::ErrorKind::kSyntax:
      return "TemplateSyntaxError";
    case jinja::ErrorKind::kUndefined:
      return "UndefinedError";
    case jinja::ErrorKind::kType:
      return "TypeError";
    case jinja::ErrorKind::kSecurity:
      return "SecurityError";
    case jinja::ErrorKind::kRaised:
      return "TemplateError";
    case jinja::ErrorKind::kLimit:
      return "LimitExceeded";
    case jinja::ErrorKind::kUnsupported:
      return "Unsupported";
  }
  return "Error";
}

Error to_error(const jinja::JinjaError& e) {
  ErrorCode code = ErrorCode::kInvalidArgument;
  if (e.kind() == jinja::ErrorKind::kLimit) code = ErrorCode::kResourceExhausted;
  if (e.kind() == jinja::ErrorKind::kUnsupported) code = ErrorCode::kUnsupported;
  std::string where = "chat template";
  if (e.pos().line > 0) {
    where += " line " + std::to_string(e.pos().line);
    if (e.pos().column > 0) where += ", column " + std::to_string(e.pos().column);
  }
  return make_error(code, where + ": " + python_error_name(e.kind()) + ": " + e.message());
}

template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const jinja::JinjaError& e) {
    return to_error(e);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kResourceExhausted, "chat template: out of memory");
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInternal, std::string("chat template: ") + e.what());
  }
}

// transformers' message preparation: drop None-valued keys, then mirror the
// reasoning under `thinking` (first) and `reasoning_content` (last), as
// {"thinking": r, **message, "reasoning_content": r}.
Result<ordered_json> prepare_messages(const ordered_json& messages) {
  if (!messages.is_array())
    return make_error(ErrorCode::kInvalidArgument, "messages must be an array");
  if (messages.empty()) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "Cannot apply chat template to an empty conversation. Provide at least one message.");
  }
  ordered_json out = ordered_json::array();
  for (const ordered_json& m : messages) {
    if (!m.is_object()) {
      return make_error(ErrorCode::kInvalidArgument,
                        "Chat messages should be dicts, but got " + m.dump());
    }
    ordered_json msg = ordered_json::object();
    for (const auto& [k, v] : m.items()) {
      if (!v.is_null()) msg[k] = v;
    }
    const ordered_json* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
      auto it = msg.find(key);
      if (it != msg.end()) {
        reasoning = &*it;
        break;
      }
    }
    if (reasoning != nullptr) {
      ordered_json r = *reasoning;
      ordered_json aliased = ordered_json::object();
      aliased["thinking"] = r;
      for (const auto& [k, v] : msg.items()) aliased[k] = v;
      aliased["reasoning_content"] = r;
      msg = std::move(aliased);
    }
    out.push_back(std::move(msg));
  }
  return out;
}

Status check_list_of_objects(const ordered_json& j, const char* what) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_array())
    return make_error(ErrorCode::kInvalidArgument, std::string(what) + " must be an array or null");
  for (const ordered_json& e : j) {
    if (!e.is_object()) {
      return make_error(ErrorCode::kInvalidArgument,
                        std::string(what) + " must be a list of dicts, got an element " + e.dump());
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  return guarded([&]() -> Result<ChatTemplate> {
    auto program = std::make_shared<jinja::Program>(jinja::parse_template(source));
    return ChatTemplate(std::move(program));
  });
}

Result<std::string> ChatTemplate::render_variables(const ordered_json& variables) const {
  if (!variables.is_object()) {
    return make_error(ErrorCode::kInvalidArgument, "template variables must be a JSON object");
  }
  return guarded([&]() -> Result<std::string> {
    std::unordered_map<std::string, jinja::Value> context;
    jinja::add_globals(context);
    for (const auto& [k, v] : variables.items()) context[k] = jinja::value_from_json(v);
    jinja::Interpreter interp(*program_, std::move(context));
    return interp.render();
  });
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (inputs.continue_final_message && inputs.add_generation_prompt) {
    return make_error(ErrorCode::kInvalidArgument,
                      "continue_final_message and add_generation_prompt are not compatible: "
                      "continue_final_message continues the final message, add_generation_prompt "
                      "starts a new assistant message");
  }
  if (inputs.continue_final_message && (!inputs.messages.is_array() || inputs.messages.empty())) {
    return make_error(ErrorCode::kInvalidArgument,
                      "continue_final_message needs a final message to continue");
  }
  PAGODA_ASSIGN_OR_RETURN(ordered_json messages, prepare_messages(inputs.messages));
  PAGODA_RETURN_IF_ERROR(check_list_of_objects(inputs.tools, "tools"));
  PAGODA_RETURN_IF_ERROR(check_list_of_objects(inputs.documents, "documents"));
  if (!inputs.extra.is_object()) {
    return make_error(ErrorCode::kInvalidArgument, "extra template kwargs must be a JSON object");
  }
  ordered_json vars = ordered_json::object();
  vars["messages"] = std::move(messages);
  vars["tools"] = inputs.tools;
  vars["documents"] = inputs.documents;
  vars["add_generation_prompt"] = inputs.add_generation_prompt;
  if (!inputs.bos_token.empty()) vars["bos_token"] = inputs.bos_token;
  if (!inputs.eos_token.empty()) vars["eos_token"] = inputs.eos_token;
  for (const auto& [k, v] : inputs.extra.items()) {
    if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt") {
      return make_error(ErrorCode::kInvalidArgument,
                        "extra template kwargs may not redefine '" + k + "'");
    }
    vars[k] = v;
  }
  PAGODA_ASSIGN_OR_RETURN(std::string rendered, render_variables(vars));
  if (!inputs.continue_final_message) return rendered;
  return open_final_message(std::move(rendered), inputs.messages.back());
}

}  // namespace pagoda
