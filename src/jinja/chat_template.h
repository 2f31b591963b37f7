// Chat templates rendered exactly as Hugging Face transformers'
// apply_chat_template(..., tokenize=False) renders them: jinja2's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with
// the loopcontrols extension and {% generation %}, transformers' tojson,
// raise_exception, strftime_now, dict and namespace globals.
//
// Inputs use nlohmann::ordered_json because key order is visible to a
// template (tojson of a tool, iteration over a dict), as in Python dicts.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/result.h"

namespace pagoda {

namespace jinja {
struct Program;
}

struct ChatTemplateInputs {
  nlohmann::ordered_json messages =
      nlohmann::ordered_json::array();  // content: string or list of parts
  nlohmann::ordered_json tools;         // null, or an array of tool definitions
  nlohmann::ordered_json documents;     // null, or an array of {title, text, ...}
  bool add_generation_prompt = false;
  // Leave the final message open (jinja/final_message.h); not with
  // add_generation_prompt. Not a template variable: transformers applies it
  // to the rendered text.
  bool continue_final_message = false;
  // Empty: the variable is not defined, as transformers does for a None token.
  std::string bos_token, eos_token;
  nlohmann::ordered_json extra =
      nlohmann::ordered_json::object();  // more kwargs: enable_thinking, ...
};

class ChatTemplate {
 public:
  // Parses once; the result renders concurrently from many threads.
  static Result<ChatTemplate> parse(std::string_view source);

  // transformers' variables: messages (keys whose value is null dropped;
  // reasoning_content / thinking / reasoning mirrored like transformers),
  // tools and documents (None when null), add_generation_prompt, the
  // non-empty special tokens, then `extra`. Template errors (syntax found
  // late, undefined values, raise_exception) are kInvalidArgument; resource
  // limits kResourceExhausted; unsupported constructs kUnsupported.
  // continue_final_message then cuts the text (open_final_message); with
  // add_generation_prompt too, or without messages, it is kInvalidArgument.
  Result<std::string> render(const ChatTemplateInputs& inputs) const;

  // Renders with exactly `variables` (an object) plus the globals.
  Result<std::string> render_variables(const nlohmann::ordered_json& variables) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Program> program)
      : program_(std::move(program)) {}
  std::shared_ptr<const jinja::Program> program_;
};

}  // namespace pagoda
