// A test double for TokenConstraint: the output must be exactly `tokens`,
// then `eos`. Finished once `tokens` are all accepted.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "sample/token_constraint.h"

namespace pagoda::testing {

class SequenceConstraintState final : public TokenConstraint {
 public:
  SequenceConstraintState(std::vector<int32_t> tokens, int32_t eos)
      : tokens_(std::move(tokens)), eos_(eos) {}

  void fill_next_mask(std::span<uint32_t> words) const override {
    const int32_t next = pos_ < tokens_.size() ? tokens_[pos_] : eos_;
    words[static_cast<size_t>(next) >> 5] |= 1u << (next & 31);
  }
  bool accept(int32_t token) override {
    if (pos_ < tokens_.size() && token == tokens_[pos_]) {
      ++pos_;
      return true;
    }
    return pos_ == tokens_.size() && token == eos_;
  }
  bool is_finished() const override { return pos_ == tokens_.size(); }
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<SequenceConstraintState>(*this);
  }

 private:
  std::vector<int32_t> tokens_;
  int32_t eos_;
  size_t pos_ = 0;
};

class SequenceConstraint final : public CompiledConstraint {
 public:
  SequenceConstraint(std::vector<int32_t> tokens, int32_t eos)
      : tokens_(std::move(tokens)), eos_(eos) {}
  std::unique_ptr<TokenConstraint> start() const override {
    return std::make_unique<SequenceConstraintState>(tokens_, eos_);
  }

 private:
  std::vector<int32_t> tokens_;
  int32_t eos_;
};

// The ids a constraint state allows next, over a vocabulary of `vocab` tokens.
inline std::vector<int32_t> allowed_ids(const TokenConstraint& state, int64_t vocab) {
  std::vector<uint32_t> words(static_cast<size_t>((vocab + 31) / 32), 0u);
  state.fill_next_mask(words);
  std::vector<int32_t> ids;
  for (size_t w = 0; w < words.size(); ++w) {
    for (int b = 0; b < 32; ++b) {
      if (words[w] >> b & 1u) ids.push_back(static_cast<int32_t>(w * 32 + b));
    }
  }
  return ids;
}

}  // namespace pagoda::testing
