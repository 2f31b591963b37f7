// The token-budget rule for one request group in one step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

struct GroupChunks {
  std::vector<int32_t> num_new_tokens;  // per sequence, in input order
  int32_t total = 0;
  bool samples = false;  // every sequence computes up to its last token and gets a sampled token
};

// remaining[i]: uncomputed tokens of sequence i; budget: tokens left in the
// step; max_chunk: per-sequence cap (0: none).
// A group samples in lockstep: when every sequence can finish its remaining
// tokens within the budget and the cap, all of them do (and sample);
// otherwise each advances by at most remaining - 1 (prefill chunks; nobody
// samples), in order, until the budget runs out. A lone sequence thus gets a
// chunk of min(remaining, budget, cap) and samples only on its last chunk.
GroupChunks split_group(std::span<const int32_t> remaining, int32_t budget, int32_t max_chunk);

}  // namespace pagoda
