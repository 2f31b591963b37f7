// Which chat template a model is served with: --chat-template's value read as
// vLLM reads it (a file, else the template itself), plus the names of the
// model's own templates (transformers' named templates, e.g. "tool_use"),
// and that template parsed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

struct ChatTemplateSource {
  std::string text;    // the Jinja source
  std::string origin;  // for messages: "file x.jinja", "the model's 'tool_use' template", ...
};

// `value` "": the model's default template (nullopt when it has none).
// Otherwise, in order: the contents of the file `value` names; the model's
// template of that name; `value` itself when it holds a '{', '}' or newline
// (an inline template). Errors: a file that cannot be read, or a value that is
// none of these (the message lists the model's template names).
Result<std::optional<ChatTemplateSource>> resolve_chat_template(std::string_view value,
                                                                const Tokenizer& tokenizer);

// resolve_chat_template, parsed. Errors: resolve_chat_template's, or a
// template that does not parse (naming its origin).
Result<std::optional<ChatTemplate>> load_chat_template(std::string_view value,
                                                       const Tokenizer& tokenizer);

}  // namespace pagoda
