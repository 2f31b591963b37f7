// WordPiece (BERT): greedy longest-match-first over each word, continuation
// pieces carrying a prefix ("##"); a word that cannot be covered, or longer
// than max_input_chars_per_word chars, becomes the unknown token.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "tokenizer/flat_maps.h"
#include "tokenizer/model.h"

namespace pagoda::tok {

struct WordPieceConfig {
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;
};

class WordPieceModel final : public Model {
 public:
  static Result<std::unique_ptr<WordPieceModel>> create(
      const std::vector<std::pair<std::string, int32_t>>& vocab, const WordPieceConfig& config);

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    return vocab_.find(token);
  }
  const std::string* id_to_token(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }

 private:
  WordPieceModel() = default;

  WordPieceConfig config_;
  StringIdMap vocab_;
  std::vector<std::string> pieces_;
  std::vector<bool> has_piece_;
  int32_t unk_id_ = -1;
};

}  // namespace pagoda::tok
