// Checks a StepBatch against the runner's limits before anything touches
// device memory: every size, index and slot, so a bad step is an error value
// naming the field, never an out-of-bounds access.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "batch/step_batch.h"

namespace pagoda {

struct StepLimits {
  int64_t max_tokens = 0;          // T
  int64_t max_seqs = 0;            // S
  int64_t max_blocks_per_seq = 0;  // block table width
  int64_t num_kv_blocks = 0;
  int64_t block_size = 0;
  int64_t vocab_size = 0;  // logits width (sampling's token ids)
  int64_t max_model_len = 0;
  // Rows the previously launched step sampled (the bound of pending_sources;
  // 0: no step may take pending tokens now).
  int64_t num_pending_sources = 0;
  // The sliding-window KV group's pool (0: the runner keeps no such group,
  // and a step must carry none of its fields) and its window.
  int64_t num_sliding_kv_blocks = 0;
  int64_t sliding_window = 0;
  // Bound of token_ids (RunnerOptions::input_vocab_size); 0: vocab_size.
  int64_t input_vocab_size = 0;
};

// `sampling`: also check step.sampling (one row per logits row, CSR offsets,
// token ids, allowed-token masks, top-logprob widths).
Status validate_step(const StepBatch& step, const StepLimits& limits, bool sampling);
// The sampling checks of validate_step alone, for `num_rows` logits rows of
// `vocab_size` tokens (a step launched with StepBatch::defer_sampling).
Status validate_sampling(const SamplingBatch& sampling, int64_t num_rows, int64_t vocab_size);

}  // namespace pagoda
