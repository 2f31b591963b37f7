// SuffixProposer: suffix decoding (SuffixDecoding, arXiv 2411.04975), as vLLM's
// "suffix" method runs it (Arctic Inference's SuffixDecodingCache).
//
// Two kinds of SuffixTree, both suffix_max_tree_depth deep:
//  - one per running sequence over its prompt and outputs, extended each step
//    by the tokens new since the last call and dropped when it ends;
//  - one global tree over the outputs of the last suffix_max_cached_requests
//    ended sequences (0: none). Outputs only, as vLLM does: a request's own
//    prompt is already in its own tree, and other requests' prompts (often
//    long, shared system prompts or documents) would crowd the global tree
//    with text the model reads rather than writes. When a sequence ends past
//    the cap, the oldest cached one is removed (counts decremented, nodes
//    freed), so the global tree's memory stays bounded.
// Each step drafts, for each sequence, the best path of SuffixTree::speculate
// over the last suffix_max_tree_depth tokens in each tree, capped at
// min(max_draft, floor(suffix_max_spec_factor * match length)) tokens: the
// per-request adaptive depth. The global tree's draft replaces the
// sequence's own only with a strictly higher score (expected accepted
// tokens). Like vLLM, it does not use on_verified.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "spec/proposer.h"
#include "spec/spec_config.h"
#include "spec/suffix_tree.h"

namespace pagoda {

class SuffixProposer final : public Proposer {
 public:
  explicit SuffixProposer(const SpeculativeConfig& config);

  Status propose(std::span<const DraftInput> inputs,
                 std::vector<std::vector<int32_t>>& drafts) override;
  void on_sequence_end(int64_t seq_id, std::span<const int32_t> tokens,
                       int32_t num_prompt_tokens) override;

  // For tests: the global tree, and how many sequences have their own tree.
  const SuffixTree& global_tree() const { return global_; }
  size_t num_sequence_trees() const { return local_.size(); }

 private:
  int32_t max_depth_;
  int32_t max_cached_;
  double max_spec_factor_;
  double min_token_prob_;
  std::unordered_map<int64_t, std::unique_ptr<SuffixTree>> local_;
  SuffixTree global_;
  std::deque<int64_t> cached_;  // sequences in global_, oldest first
};

}  // namespace pagoda
