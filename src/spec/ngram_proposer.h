// NgramProposer: prompt lookup (vLLM's "ngram" method). For the longest n in
// [prompt_lookup_min, prompt_lookup_max] whose last n tokens occurred earlier
// in the sequence (prompt and outputs), drafts the tokens that followed the
// earliest such occurrence: at most max_draft, fewer where the sequence ends.
// This is vLLM v1's rule (its reversed-KMP search keeps the earliest match of
// the longest length), reproduced exactly.
//
// Whether a draft may follow one more token (may_draft_after_next_token):
// a match of n >= min_n tokens ending at that token starts with the last
// n - 1 tokens known now, so those must occur earlier, ending before the
// last token; the index answers that in O(max_n), so a sequence without
// such an occurrence (e.g. random tokens) is never held for nor drafted,
// and is drafted at the first step whose search can find a match.
//
// Cost: each sequence keeps an index of its earlier n-grams, extended by the
// tokens new since the last call, so a step costs O(new tokens * max_n +
// max_n + max_draft) per sequence, not O(length). Memory: O(length * max_n)
// per running sequence, dropped in on_sequence_end.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "spec/proposer.h"
#include "spec/spec_config.h"

namespace pagoda {

class NgramProposer final : public Proposer {
 public:
  explicit NgramProposer(const SpeculativeConfig& config);
  ~NgramProposer() override;

  Status propose(std::span<const DraftInput> inputs,
                 std::vector<std::vector<int32_t>>& drafts) override;
  bool may_draft_after_next_token(const DraftInput& in) override;
  void on_sequence_end(int64_t seq_id, std::span<const int32_t> tokens,
                       int32_t num_prompt_tokens) override;

  // Number of sequences with an index (for tests).
  size_t num_indexed_sequences() const { return index_.size(); }

 private:
  class NgramIndex;

  // in's index, extended by every position but the last (the ones an
  // earlier occurrence may end at); rebuilt where the tokens got shorter.
  NgramIndex& indexed(const DraftInput& in);

  int32_t min_n_;
  int32_t max_n_;
  std::unordered_map<int64_t, std::unique_ptr<NgramIndex>> index_;
};

// Whether some token t makes ngram_draft_reference(tokens + t) non-empty,
// by trying every t in [0, vocab_size). For tests and as the specification
// of may_draft_after_next_token.
bool ngram_may_draft_reference(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n,
                               int32_t vocab_size);

// The draft for one sequence without any state: vLLM's rule, computed by
// brute force in O(length * max_n). For tests and as the specification.
std::vector<int32_t> ngram_draft_reference(std::span<const int32_t> tokens, int32_t min_n,
                                           int32_t max_n, int32_t max_draft);

}  // namespace pagoda
