// A minimal greedy decoding driver over ModelRunner for the golden tests:
// every sequence gets a contiguous run of blocks, and each step packs, in
// order, every unfinished sequence's next prompt chunk or decode token into
// one ragged batch under a token budget.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "model/model_runner.h"

namespace pagoda::golden {

// One generated token and the top logprobs of the distribution it came from.
struct StepRecord {
  int32_t token = -1;
  std::vector<int32_t> top_ids;  // descending
  std::vector<float> top_logprobs;
};

struct DriverOptions {
  int num_steps = 32;           // tokens to generate per sequence
  int prefill_chunk = 1 << 30;  // max prompt tokens of one sequence per step
  int token_budget = 1 << 30;   // max tokens of one step (capped by the runner)
  int num_top_logprobs = 20;
  bool reverse_blocks = false;  // hand out each sequence's blocks in descending order
};

// Greedy-decodes every prompt; out[i] holds prompt i's records. Sequence i
// uses blocks [i * B, (i + 1) * B) with B = blocks for prompt + num_steps.
Status run_greedy(ModelRunner& runner, const std::vector<std::vector<int32_t>>& prompts,
                  const DriverOptions& options, std::vector<std::vector<StepRecord>>* out);

// Blocks one sequence of `num_tokens` needs.
inline int64_t blocks_for(int64_t num_tokens, int64_t block_size) {
  return (num_tokens + block_size - 1) / block_size;
}

}  // namespace pagoda::golden
