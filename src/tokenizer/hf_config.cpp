// tokenizer_config.json, special_tokens_map.json, generation_config.json and
// the chat templates (io/chat_templates.h) beside a tokenizer.json / tokenizer.model.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/chat_templates.h"
#include "tokenizer/tokenizer_state.h"

namespace pagoda::tok {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Reads `path` when it exists; nullopt when absent.
Result<std::optional<std::string>> read_optional(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, "cannot open '" + path.string() + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return std::optional<std::string>(buffer.str());
}

Result<json> read_json(const fs::path& path) {
  PAGODA_ASSIGN_OR_RETURN(auto text, read_optional(path));
  if (!text) return json();
  try {
    json j = json::parse(*text);
    return j.is_object() ? j : json();
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kCorrupt,
                      "'" + path.string() + "' is not valid JSON: " + e.what());
  }
}

// A token given as "text", {"content": "text", ...} or null.
std::optional<std::string> token_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) {
    return j["content"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<int32_t> id_of(const TokenizerState& state, const std::string& text) {
  if (auto id = state.added.find(text)) return id;
  return state.model->token_to_id(text);
}

void read_special(const json& config, const json& special_map, const char* key,
                  const TokenizerState& state, std::optional<int32_t>& id, std::string* text) {
  std::optional<std::string> t;
  if (config.contains(key)) {
    t = token_text(config[key]);
    if (!t && config[key].is_null()) {
      id.reset();
      if (text) text->clear();
      return;
    }
  }
  if (!t && special_map.contains(key)) t = token_text(special_map[key]);
  if (!t) return;
  auto found = id_of(state, *t);
  if (!found) return;
  id = found;
  if (text) *text = *t;
}

// An explicit add_bos_token / add_eos_token overrides the post-processor.
void apply_add_flag(const json& config, const char* key, std::optional<int32_t> token,
                    std::vector<int32_t>& ids, bool at_front, bool& flag) {
  auto has_token = [&] {
    if (!token || ids.empty()) return false;
    return at_front ? ids.front() == *token : ids.back() == *token;
  };
  if (!config.contains(key) || !config[key].is_boolean()) {
    flag = has_token();
    return;
  }
  flag = config[key].get<bool>() && token.has_value();
  if (flag && !has_token()) {
    at_front ? (void)ids.insert(ids.begin(), *token) : ids.push_back(*token);
  } else if (!flag && has_token()) {
    at_front ? (void)ids.erase(ids.begin()) : ids.pop_back();
  }
}

// transformers also registers the added tokens listed in tokenizer_config.json.
void read_added_tokens_decoder(const json& config, TokenizerState& state) {
  if (!config.contains("added_tokens_decoder") || !config["added_tokens_decoder"].is_object()) {
    return;
  }
  for (auto it = config["added_tokens_decoder"].begin(); it != config["added_tokens_decoder"].end();
       ++it) {
    int32_t id = -1;
    try {
      id = std::stoi(it.key());
    } catch (const std::exception&) {
      continue;
    }
    const json& t = it.value();
    if (id < 0 || id >= kMaxTokenId || state.added.find(id) || !t.is_object() ||
        !t.value("content", json()).is_string()) {
      continue;
    }
    AddedToken a;
    a.id = id;
    a.content = t["content"].get<std::string>();
    a.special = t.value("special", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.normalized = t.value("normalized", !a.special);
    a.single_word = t.value("single_word", false);
    state.added.add(std::move(a));
  }
}

}  // namespace

Status apply_hf_config(const std::string& folder, TokenizerState& state) {
  fs::path dir(folder.empty() ? "." : folder);
  PAGODA_ASSIGN_OR_RETURN(json config, read_json(dir / "tokenizer_config.json"));
  PAGODA_ASSIGN_OR_RETURN(json special_map, read_json(dir / "special_tokens_map.json"));
  PAGODA_ASSIGN_OR_RETURN(json generation, read_json(dir / "generation_config.json"));
  if (config.is_null()) config = json::object();
  if (special_map.is_null()) special_map = json::object();
  try {
    read_added_tokens_decoder(config, state);
    read_special(config, special_map, "bos_token", state, state.bos_id, &state.bos_token);
    read_special(config, special_map, "eos_token", state, state.eos_id, &state.eos_token);
    read_special(config, special_map, "unk_token", state, state.unk_id, nullptr);
    read_special(config, special_map, "pad_token", state, state.pad_id, nullptr);
    apply_add_flag(config, "add_bos_token", state.bos_id, state.prefix_ids, true, state.add_bos);
    apply_add_flag(config, "add_eos_token", state.eos_id, state.suffix_ids, false, state.add_eos);
    if (generation.is_object() && generation.contains("eos_token_id")) {
      const json& e = generation["eos_token_id"];
      if (e.is_number_integer()) state.extra_eos_ids.push_back(e.get<int32_t>());
      if (e.is_array()) {
        for (const json& x : e) {
          if (x.is_number_integer()) state.extra_eos_ids.push_back(x.get<int32_t>());
        }
      }
    }
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kCorrupt,
                      "tokenizer config in '" + folder + "' has an unexpected field: " + e.what());
  }
  PAGODA_ASSIGN_OR_RETURN(state.chat_templates, read_chat_templates(dir, config));
  return Status::Ok();
}

}  // namespace pagoda::tok
