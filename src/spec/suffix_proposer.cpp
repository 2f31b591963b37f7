#include "spec/suffix_proposer.h"

#include <algorithm>

namespace pagoda {

SuffixProposer::SuffixProposer(const SpeculativeConfig& config)
    : max_depth_(config.suffix_max_tree_depth),
      max_cached_(config.suffix_max_cached_requests),
      max_spec_factor_(config.suffix_max_spec_factor),
      min_token_prob_(config.suffix_min_token_prob),
      global_(config.suffix_max_tree_depth) {}

Status SuffixProposer::propose(std::span<const DraftInput> inputs,
                               std::vector<std::vector<int32_t>>& drafts) {
  drafts.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DraftInput& in = inputs[i];
    std::unique_ptr<SuffixTree>& tree = local_[in.seq_id];
    // Tokens only grow between calls; a shorter sequence means a restart.
    if (!tree || tree->sequence_length(0) > in.tokens.size()) {
      tree = std::make_unique<SuffixTree>(max_depth_);
    }
    tree->extend(0, in.tokens.subspan(tree->sequence_length(0)));
    const size_t context_len = std::min(in.tokens.size(), static_cast<size_t>(max_depth_));
    const auto context = in.tokens.last(context_len);
    SuffixDraft best = tree->speculate(context, in.max_draft, max_spec_factor_, min_token_prob_);
    if (max_cached_ > 0) {
      SuffixDraft other =
          global_.speculate(context, in.max_draft, max_spec_factor_, min_token_prob_);
      if (other.score > best.score) best = std::move(other);
    }
    drafts[i] = std::move(best.tokens);
  }
  return Status::Ok();
}

void SuffixProposer::on_sequence_end(int64_t seq_id, std::span<const int32_t> tokens,
                                     int32_t num_prompt_tokens) {
  local_.erase(seq_id);
  if (max_cached_ <= 0) return;
  const auto outputs = tokens.subspan(static_cast<size_t>(num_prompt_tokens));
  if (outputs.empty()) return;
  global_.extend(seq_id, outputs);
  cached_.push_back(seq_id);
  while (static_cast<int64_t>(cached_.size()) > max_cached_) {
    global_.remove(cached_.front());
    cached_.pop_front();
  }
}

}  // namespace pagoda
