#include "io/hf_tokenizer_config.h"

#include <fstream>
#include <sstream>

namespace pagoda {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// `path` parsed; {} when it does not exist or holds no JSON object.
Result<json> read_optional_object(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return json::object();
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, "cannot open '" + path.string() + "'");
  std::stringstream text;
  text << in.rdbuf();
  try {
    json j = json::parse(text.str());
    return j.is_object() ? j : json::object();
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kCorrupt,
                      "'" + path.string() + "' is not valid JSON: " + e.what());
  }
}

}  // namespace

Result<HfTokenizerConfig> read_hf_tokenizer_config(const fs::path& dir) {
  HfTokenizerConfig out;
  PAGODA_ASSIGN_OR_RETURN(out.tokenizer_config, read_optional_object(dir / "tokenizer_config.json"));
  PAGODA_ASSIGN_OR_RETURN(out.special_tokens_map,
                          read_optional_object(dir / "special_tokens_map.json"));
  PAGODA_ASSIGN_OR_RETURN(out.chat_templates, read_chat_templates(dir, out.tokenizer_config));
  return out;
}

std::optional<std::string> special_token_text(const json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) {
    return entry["content"].get<std::string>();
  }
  return std::nullopt;
}

SpecialTokenSetting special_token(const HfTokenizerConfig& files, const std::string& key) {
  SpecialTokenSetting out;
  if (auto it = files.tokenizer_config.find(key); it != files.tokenizer_config.end()) {
    out.text = special_token_text(*it);
    if (!out.text && it->is_null()) {
      out.cleared = true;
      return out;
    }
  }
  if (auto it = files.special_tokens_map.find(key);
      !out.text && it != files.special_tokens_map.end()) {
    out.text = special_token_text(*it);
  }
  return out;
}

}  // namespace pagoda
