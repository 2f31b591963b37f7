// The vocabulary model that turns one pre-tokenized piece into ids (BPE by
// merge rank, SentencePiece-style BPE by score, or libsentencepiece).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::tok {

// Ids at or above this are rejected as corrupt (real vocabularies stay below 2^20).
constexpr int32_t kMaxTokenId = 1 << 24;

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one non-empty piece of valid UTF-8. Thread-safe.
  virtual void tokenize(std::string_view piece, std::vector<int32_t>& out) const = 0;
  // tokenize() for a piece that continues earlier text: a model that
  // prefixes every piece itself (SentencePiece's dummy "▁") leaves that out.
  virtual void tokenize_continuation(std::string_view piece, std::vector<int32_t>& out) const {
    tokenize(piece, out);
  }
  // Id of a raw vocabulary piece (as written in the vocabulary file).
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // The raw vocabulary piece of id, or nullptr outside the vocabulary.
  virtual const std::string* id_to_token(int32_t id) const = 0;
  // One past the largest id.
  virtual int32_t vocab_size() const = 0;
};

}  // namespace pagoda::tok
