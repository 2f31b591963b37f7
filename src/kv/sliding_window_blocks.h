// The bound on the blocks one sequence holds in a sliding-window KV group
// (kv_manager.h, "KV groups"): a pure function shared by the KV manager
// (admission), the model runner (sizing the sliding pool) and the engine's
// per-request fit check, so that all three agree.
#pragma once

#include <algorithm>
#include <cstdint>

namespace pagoda {

// Most blocks of `block_size` tokens that a sequence reaching `max_len`
// tokens in steps of at most `max_step_tokens` new tokens holds at once in a
// group that keeps the last `window` positions: a step's keys span
// window - 1 positions behind its first query plus its own tokens, and a
// span of L positions touches at most ceil(L / block_size) + 1 blocks; never
// more than the whole context's ceil(max_len / block_size).
inline int64_t sliding_window_blocks(int64_t window, int64_t block_size, int64_t max_len,
                                     int64_t max_step_tokens) {
  const int64_t full = (max_len + block_size - 1) / block_size;
  const int64_t span = window - 1 + std::min(max_step_tokens, max_len);
  return std::min(full, (span + block_size - 1) / block_size + 1);
}

}  // namespace pagoda
