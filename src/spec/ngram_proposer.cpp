#include "spec/ngram_proposer.h"

#include <algorithm>

namespace pagoda {

// A trie of the sequence's n-grams read backwards (last token first), up to
// max_n tokens deep: the node reached by t[p], t[p-1], ..., t[p-d+1] stands
// for the d-gram ending at position p and remembers the earliest position
// first_end at which that d-gram ends. Positions are added in increasing
// order, so the first insertion that creates a node sets first_end for good.
class NgramProposer::NgramIndex {
 public:
  explicit NgramIndex(int32_t max_n) : max_n_(max_n) { first_end_.push_back(-1); }

  // Number of leading positions indexed so far.
  int64_t num_indexed() const { return num_indexed_; }

  // Indexes every n-gram (n <= max_n) ending at positions
  // [num_indexed(), end) of tokens. O((end - num_indexed()) * max_n).
  void index_until(std::span<const int32_t> tokens, int64_t end) {
    for (int64_t p = num_indexed_; p < end; ++p) {
      int32_t node = 0;
      for (int64_t q = p; q >= 0 && p - q < max_n_; --q) {
        auto [it, inserted] =
            children_.try_emplace(key(node, tokens[q]), static_cast<int32_t>(first_end_.size()));
        if (inserted) first_end_.push_back(p);
        node = it->second;
      }
    }
    num_indexed_ = std::max(num_indexed_, end);
  }

  // The longest d <= max_n such that the last d tokens end at an indexed
  // position, and the earliest such end position (d = 0 when none).
  std::pair<int32_t, int64_t> longest_match(std::span<const int32_t> tokens) const {
    int32_t node = 0;
    int32_t depth = 0;
    for (int64_t q = static_cast<int64_t>(tokens.size()) - 1; q >= 0 && depth < max_n_; --q) {
      auto it = children_.find(key(node, tokens[q]));
      if (it == children_.end()) break;
      node = it->second;
      ++depth;
    }
    return {depth, first_end_[static_cast<size_t>(node)]};
  }

 private:
  static uint64_t key(int32_t node, int32_t token) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) |
           static_cast<uint32_t>(token);
  }

  int32_t max_n_;
  int64_t num_indexed_ = 0;
  std::vector<int64_t> first_end_;                  // per node; the root's is -1
  std::unordered_map<uint64_t, int32_t> children_;  // (node, token) -> child
};

NgramProposer::NgramProposer(const SpeculativeConfig& config)
    : min_n_(config.prompt_lookup_min), max_n_(config.prompt_lookup_max) {}

NgramProposer::~NgramProposer() = default;

NgramProposer::NgramIndex& NgramProposer::indexed(const DraftInput& in) {
  const int64_t len = static_cast<int64_t>(in.tokens.size());
  std::unique_ptr<NgramIndex>& index = index_[in.seq_id];
  // Tokens only grow between calls; a shorter sequence means a restart.
  if (!index || index->num_indexed() > len - 1) index = std::make_unique<NgramIndex>(max_n_);
  // Every position but the last may hold an earlier occurrence.
  index->index_until(in.tokens, len - 1);
  return *index;
}

Status NgramProposer::propose(std::span<const DraftInput> inputs,
                              std::vector<std::vector<int32_t>>& drafts) {
  drafts.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DraftInput& in = inputs[i];
    std::vector<int32_t>& draft = drafts[i];
    draft.clear();
    const int64_t len = static_cast<int64_t>(in.tokens.size());
    const auto [n, end] = indexed(in).longest_match(in.tokens);
    if (n < min_n_) continue;
    const int64_t from = end + 1;
    const int64_t count = std::min<int64_t>(in.max_draft, len - from);
    draft.assign(in.tokens.begin() + from, in.tokens.begin() + from + count);
  }
  return Status::Ok();
}

bool NgramProposer::may_draft_after_next_token(const DraftInput& in) {
  // With the token t appended, a match of n tokens ends at t and occurs
  // earlier ending at e <= len - 1: tokens[e - n + 1, e) equal the last
  // n - 1 tokens now, an occurrence ending at e - 1 <= len - 2 -- exactly
  // the positions indexed. Any t = tokens[e] then completes it, so this is
  // exact (ngram_may_draft_reference). min_n = 1 matches the empty suffix.
  if (in.tokens.empty()) return false;
  return indexed(in).longest_match(in.tokens).first >= min_n_ - 1;
}

void NgramProposer::on_sequence_end(int64_t seq_id, std::span<const int32_t> tokens,
                                    int32_t num_prompt_tokens) {
  (void)tokens, (void)num_prompt_tokens;
  index_.erase(seq_id);
}

std::vector<int32_t> ngram_draft_reference(std::span<const int32_t> tokens, int32_t min_n,
                                           int32_t max_n, int32_t max_draft) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Occurrences end at positions <= len - 2; take the earliest start.
    for (int64_t start = 0; start + n <= len - 1; ++start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max_draft, len - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

bool ngram_may_draft_reference(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n,
                               int32_t vocab_size) {
  std::vector<int32_t> longer(tokens.begin(), tokens.end());
  longer.push_back(0);
  for (int32_t t = 0; t < vocab_size; ++t) {
    longer.back() = t;
    if (!ngram_draft_reference(longer, min_n, max_n, 1).empty()) return true;
  }
  return false;
}

}  // namespace pagoda
