// The tokenizer-side files of a Hugging Face model folder, read once:
// tokenizer_config.json, special_tokens_map.json and the chat templates
// (io/chat_templates.h's rule). The tokenizer (special tokens, added tokens,
// add_bos/add_eos) and `pagoda chat-template` consume them.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/result.h"
#include "io/chat_templates.h"

namespace pagoda {

struct HfTokenizerConfig {
  // tokenizer_config.json; {} when absent or not a JSON object.
  nlohmann::json tokenizer_config = nlohmann::json::object();
  // special_tokens_map.json; {} when absent or not a JSON object.
  nlohmann::json special_tokens_map = nlohmann::json::object();
  NamedChatTemplates chat_templates;
};

// Reads the files of `dir`; each is optional. Errors: a file that cannot be
// read (kIo), or that is not valid JSON (kCorrupt: "'PATH' is not valid
// JSON: ...").
Result<HfTokenizerConfig> read_hf_tokenizer_config(const std::filesystem::path& dir);

// The text of a special token as tokenizer_config.json / special_tokens_map.json
// write it: "text" or {"content": "text", ...}; nullopt otherwise (null, absent).
std::optional<std::string> special_token_text(const nlohmann::json& entry);

// A special token ("bos_token", "eos_token", "unk_token", "pad_token", ...) as
// transformers reads it: tokenizer_config.json's entry, else
// special_tokens_map.json's. The id needs the vocabulary (the tokenizer).
struct SpecialTokenSetting {
  bool cleared = false;             // tokenizer_config.json sets it to null: no such token
  std::optional<std::string> text;  // nullopt when neither file names it (or cleared)
};
SpecialTokenSetting special_token(const HfTokenizerConfig& files, const std::string& key);

}  // namespace pagoda
