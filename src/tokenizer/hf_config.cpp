// What tokenizer_config.json, special_tokens_map.json (io/hf_tokenizer_config.h)
// and generation_config.json say about a tokenizer.json / tokenizer.model:
// special tokens, added tokens, add_bos/add_eos, extra eos ids, chat templates.
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_state.h"

namespace pagoda::tok {

namespace {

using nlohmann::json;

std::optional<int32_t> id_of(const TokenizerState& state, const std::string& text) {
  if (auto id = state.added.find(text)) return id;
  return state.model->token_to_id(text);
}

// The id (and text) of a special token that the files set, found in the vocabulary;
// unchanged when they set none or the vocabulary lacks it.
void read_special(const HfTokenizerConfig& files, const char* key, const TokenizerState& state,
                  std::optional<int32_t>& id, std::string* text) {
  const SpecialTokenSetting setting = special_token(files, key);
  if (setting.cleared) {
    id.reset();
    if (text) text->clear();
    return;
  }
  if (!setting.text) return;
  auto found = id_of(state, *setting.text);
  if (!found) return;
  id = found;
  if (text) *text = *setting.text;
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

Status apply_hf_config(const std::string& folder, const HfTokenizerConfig& files,
                       std::span<const int32_t> generation_eos_ids, TokenizerState& state) {
  const json& config = files.tokenizer_config;
  try {
    read_added_tokens_decoder(config, state);
    read_special(files, "bos_token", state, state.bos_id, &state.bos_token);
    read_special(files, "eos_token", state, state.eos_id, &state.eos_token);
    read_special(files, "unk_token", state, state.unk_id, nullptr);
    read_special(files, "pad_token", state, state.pad_id, nullptr);
    apply_add_flag(config, "add_bos_token", state.bos_id, state.prefix_ids, true, state.add_bos);
    apply_add_flag(config, "add_eos_token", state.eos_id, state.suffix_ids, false, state.add_eos);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kCorrupt,
                      "tokenizer config in '" + folder + "' has an unexpected field: " + e.what());
  }
  state.extra_eos_ids.insert(state.extra_eos_ids.end(), generation_eos_ids.begin(),
                            generation_eos_ids.end());
  state.chat_templates = files.chat_templates;
  return Status::Ok();
}

}  // namespace pagoda::tok
