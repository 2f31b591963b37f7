// A model's chat templates, found by one rule everywhere (the tokenizer, the
// engine, `pagoda chat-template`): transformers' PreTrainedTokenizerBase.
// _from_pretrained. In a folder, chat_template.jinja ("default") and
// additional_chat_templates/NAME.jinja ("NAME"), when any of them exists,
// replace tokenizer_config.json's "chat_template" entirely; otherwise that
// field is read: a string ("default") or a list of {"name", "template"}.
// A GGUF file has tokenizer.chat_template ("default") and
// tokenizer.chat_template.NAME ("NAME").
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace pagoda {

class GgufFile;

// (name, template source) pairs, in the order found; names are unique.
using NamedChatTemplates = std::vector<std::pair<std::string, std::string>>;

// `tokenizer_config` is the parsed tokenizer_config.json (null when absent).
// Errors: a template file that cannot be read (kIo, naming it).
Result<NamedChatTemplates> read_chat_templates(const std::filesystem::path& dir,
                                               const nlohmann::json& tokenizer_config);

// A GGUF file's templates: "default" first when present, then the NAMEs in
// metadata order. Keys that are not strings are skipped.
NamedChatTemplates gguf_chat_templates(const GgufFile& file);

// transformers' get_chat_template: the template called `name` when given,
// else "tool_use" when tools are passed and it exists, else "default".
// Errors name `where` (e.g. the folder) and the names there.
Result<std::string> pick_chat_template(const NamedChatTemplates& templates, std::string_view name,
                                       bool has_tools, std::string_view where);

}  // namespace pagoda
