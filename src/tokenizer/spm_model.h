// SentencePiece-style BPE by piece score, as llama.cpp tokenizes GGUF "llama"
// vocabularies: repeatedly join the adjacent pair whose joined text is the
// highest-scoring vocabulary piece (leftmost on ties); chars left without a
// piece become <0xXX> byte tokens, else the unknown token.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "tokenizer/flat_maps.h"
#include "tokenizer/model.h"

namespace pagoda::tok {

// GGUF tokenizer.ggml.token_type values.
enum class GgufTokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

class SpmModel final : public Model {
 public:
  // tokens, scores and types are indexed by id (same length).
  static Result<std::unique_ptr<SpmModel>> create(std::vector<std::string> tokens,
                                                  std::vector<float> scores,
                                                  std::vector<GgufTokenType> types, int32_t unk_id);

  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    return all_.find(token);
  }
  const std::string* id_to_token(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(tokens_.size()); }

 private:
  SpmModel() = default;

  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  StringIdMap all_;
  StringIdMap mergeable_;  // normal and user-defined pieces
  std::array<int32_t, 256> byte_ids_{};
  int32_t unk_id_ = -1;
};

}  // namespace pagoda::tok
