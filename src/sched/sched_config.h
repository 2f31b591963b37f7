// Scheduler limits: the per-step token budget, the sequence cap, the bounded
// waiting queue and the KV pool.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "kv/kv_manager.h"

namespace pagoda {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 2048;  // token budget of one step (all sequences)
  int32_t max_num_seqs = 256;    // running sequences at once (a request group counts its width)
  int32_t max_waiting = 1024;    // add_request fails with kResourceExhausted beyond this
  int32_t max_chunk_tokens = 0;  // per-sequence cap on new tokens per step; 0: only the budget
  int32_t max_model_len = 4096;  // prompt + output tokens of one sequence
  KvConfig kv;

  // Names the bad field and the allowed range.
  Status validate() const;
};

}  // namespace pagoda
