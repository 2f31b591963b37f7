// How many bytes the KV pool gets when --num-kv-blocks is not given: the
// rule for each backend as a pure function of the sizes and the memory
// measured, plus the words the start-up log uses for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pagoda {

struct KvBudget {
  double bytes = 0;  // <= 0: no room
  std::string how;   // for the start-up KV line, e.g. "256 seqs x 2048 tokens"
};

// The CPU pool holds max_num_seqs sequences of max_model_len tokens (whole
// blocks of `block_bytes` for `block_size` tokens each), but takes at most
// kCpuKvAvailableFraction of `available` (MemAvailable, read after the
// weights and activation scratch were allocated, so they are not counted
// again); the other half stays for the rest of the system and the page
// cache. `available` 0 (unknown) caps it at kCpuKvFallbackBytes. `ranks`
// pools share that memory (the tensor- and pipeline-parallel ranks of one
// process on the cpu): each gets 1/ranks of the cap.
inline constexpr double kCpuKvAvailableFraction = 0.5;
inline constexpr double kCpuKvFallbackBytes = 1024.0 * 1024.0 * 1024.0;
KvBudget cpu_kv_budget(int64_t block_bytes, int64_t block_size, int64_t max_model_len,
                       int64_t max_num_seqs, size_t available, int ranks = 1);

// An explicit budget (--kv-cache-memory-bytes), on any backend.
KvBudget explicit_kv_budget(int64_t bytes);

}  // namespace pagoda
