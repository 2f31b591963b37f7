// Byte-pair encoding by merge rank (Hugging Face "BPE" model and GGUF "gpt2"
// vocabularies): lowest-rank adjacent pair first, leftmost on ties. With
// `byte_level` the model reads raw bytes and its vocabulary is stored in
// GPT-2's byte alphabet.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "tokenizer/flat_maps.h"
#include "tokenizer/model.h"
#include "tokenizer/word_cache.h"

namespace pagoda::tok {

struct BpeConfig {
  bool byte_level = false;
  bool byte_fallback = false;  // unknown chars -> <0xXX> tokens
  bool ignore_merges = false;  // a word found whole in the vocabulary is one token
  bool fuse_unk = false;
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  // Merges naming tokens outside the vocabulary are an error (Hugging Face)
  // or skipped (GGUF, like llama.cpp).
  bool strict_merges = true;
  // For a pair listed twice: the later rank wins (Hugging Face) or the first.
  bool later_merge_wins = true;
};

class BpeModel final : public Model {
 public:
  // vocab: (piece, id); merges: (left piece, right piece) in rank order.
  static Result<std::unique_ptr<BpeModel>> create(
      const std::vector<std::pair<std::string, int32_t>>& vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, const BpeConfig& config);

  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    return piece_to_id_.find(token);
  }
  const std::string* id_to_token(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(id_to_piece_.size()); }

 private:
  explicit BpeModel(const BpeConfig& config) : config_(config) {}
  Status add_merges(const std::vector<std::pair<std::string, std::string>>& merges);
  void initial_symbols(std::string_view word, std::vector<int32_t>& syms) const;
  void merge(std::vector<int32_t>& syms) const;
  void merge_long(std::vector<int32_t>& syms) const;

  BpeConfig config_;
  std::vector<std::string> id_to_piece_;
  std::vector<bool> has_piece_;
  StringIdMap piece_to_id_;  // vocabulary pieces as written
  StringIdMap lookup_;       // pieces in the model's input alphabet (raw bytes when byte_level)
  std::string prefix_key_;   // continuing_subword_prefix in the input alphabet
  std::string suffix_key_;
  std::array<int32_t, 256> byte_ids_{};      // byte_level: symbol of each byte, -1 if none
  std::array<int32_t, 256> fallback_ids_{};  // <0xXX> tokens, -1 if none
  bool all_fallback_ = false;
  int32_t unk_id_ = -1;
  MergeMap merges_;
  WordCache cache_;
};

}  // namespace pagoda::tok
