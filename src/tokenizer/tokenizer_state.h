// Everything a loaded tokenizer is made of; filled by the loaders
// (tokenizer.json, tokenizer.model, GGUF) and read by Tokenizer.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "io/gguf.h"
#include "io/hf_tokenizer_config.h"
#include "tokenizer/added_vocab.h"
#include "tokenizer/decoder.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace pagoda::tok {

struct TokenizerState {
  std::string description;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::unique_ptr<Model> model;
  AddedVocab added;
  Decoder decoder;
  // add_special_tokens: ids around the text (post-processor, then config).
  std::vector<int32_t> prefix_ids;
  std::vector<int32_t> suffix_ids;

  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  std::string bos_token, eos_token;
  std::vector<int32_t> extra_eos_ids;  // generation_config.json; GGUF eos/eot/eom
  bool add_bos = false;
  bool add_eos = false;
  NamedChatTemplates chat_templates;

  // Filled by finish_state().
  int32_t vocab_size = 0;
  std::vector<bool> special;  // by id
  std::vector<int32_t> eos_ids;
};

// Completes a loaded state: special-token table, vocabulary size, matchers of
// normalized added tokens, end-of-generation ids.
void finish_state(TokenizerState& state);

Result<std::unique_ptr<TokenizerState>> load_tokenizer_json(const std::string& json_path);
Result<std::unique_ptr<TokenizerState>> load_sentencepiece_file(const std::string& model_path);
// The vocabulary and tokenizer.ggml.* / tokenizer.chat_template* metadata of
// an opened GGUF file.
Result<std::unique_ptr<TokenizerState>> load_gguf_tokenizer(const GgufFile& gguf);
// Applies a folder's tokenizer files (read by io) and generation_config.json's
// eos ids to a state loaded from tokenizer.json / tokenizer.model. `folder`
// names the folder in errors.
Status apply_hf_config(const std::string& folder, const HfTokenizerConfig& files,
                       std::span<const int32_t> generation_eos_ids, TokenizerState& state);

}  // namespace pagoda::tok
