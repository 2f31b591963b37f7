#include "engine/chat_template_source.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace pagoda {

Result<std::optional<ChatTemplateSource>> resolve_chat_template(std::string_view value,
                                                                const Tokenizer& tokenizer) {
  if (value.empty()) {
    std::optional<std::string> text = tokenizer.chat_template();
    if (!text) return std::optional<ChatTemplateSource>();
    return std::optional(ChatTemplateSource{*text, "the model's tokenizer config"});
  }
  const std::string name(value);
  std::error_code ec;
  if (std::filesystem::is_regular_file(name, ec)) {
    std::ifstream in(name, std::ios::binary);
    if (!in) return make_error(ErrorCode::kNotFound, "--chat-template: cannot read " + name);
    std::stringstream text;
    text << in.rdbuf();
    return std::optional(ChatTemplateSource{text.str(), "file " + name});
  }
  if (std::optional<std::string> named = tokenizer.chat_template(name)) {
    return std::optional(
        ChatTemplateSource{*named, fmt::format("the model's '{}' template", name)});
  }
  if (value.find_first_of("{}\n") != std::string_view::npos) {
    return std::optional(ChatTemplateSource{name, "--chat-template (inline)"});
  }
  std::string names;
  for (const std::string& known : tokenizer.chat_template_names()) {
    names += names.empty() ? known : ", " + known;
  }
  return make_error(
      ErrorCode::kNotFound,
      fmt::format("--chat-template '{}' is not a file, not a template of the model (it has: {}), "
                  "and not a Jinja template",
                  name, names.empty() ? "none" : names));
}

Result<std::optional<ChatTemplate>> load_chat_template(std::string_view value,
                                                       const Tokenizer& tokenizer) {
  PAGODA_ASSIGN_OR_RETURN(std::optional<ChatTemplateSource> source,
                          resolve_chat_template(value, tokenizer));
  if (!source) return std::optional<ChatTemplate>();
  Result<ChatTemplate> parsed = ChatTemplate::parse(source->text);
  if (!parsed.ok()) {
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("chat template from {}: {}", source->origin, parsed.error().message));
  }
  return std::optional<ChatTemplate>(std::move(parsed).value());
}

}  // namespace pagoda
