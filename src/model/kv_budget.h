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

// The CPU pool holds max_num_seqs sequences of max_model_len tokens
// (`seq_bytes` each: kv_seq_bytes, whole blocks of every KV group) and
// `step_bytes` for one step (kv_step_blocks' bytes), but takes at most
// kCpuKvAvailableFraction of `available` (MemAvailable, read after the
// weights and activation scratch were allocated, so they are not counted
// again); the other half stays for the rest of the system and the page
// cache. `available` 0 (unknown) caps it at kCpuKvFallbackBytes. `ranks`
// pools share that memory (the tensor- and pipeline-parallel ranks of one
// process on the cpu): each gets 1/ranks of the cap.
inline constexpr double kCpuKvAvailableFraction = 0.5;
inline constexpr double kCpuKvFallbackBytes = 1024.0 * 1024.0 * 1024.0;
KvBudget cpu_kv_budget(double seq_bytes, double step_bytes, int64_t max_model_len,
                       int64_t max_num_seqs, size_t available, int ranks = 1);

// An explicit budget (--kv-cache-memory-bytes), on any backend.
KvBudget explicit_kv_budget(int64_t bytes);

// The KV groups of one runner (kv/kv_manager.h, "KV groups"): the bytes of
// one block of each group's layers (sliding_block_bytes 0 and window 0
// without a sliding-window group; either may be 0 on a pipeline stage that
// holds no layer of that group), tokens per block, and the most new tokens
// and sequences of one step (what a step adds to the sliding group).
struct KvGroupShape {
  int64_t full_block_bytes = 0;
  int64_t sliding_block_bytes = 0;
  int64_t block_size = 16;
  int64_t window = 0;  // > 0: a sliding-window group
  int64_t max_step_tokens = 0;
  int64_t max_step_seqs = 0;
};

// Blocks in each group's pool.
struct KvPoolSizes {
  int64_t full = 0;
  int64_t sliding = 0;  // 0 without a sliding-window group
};

// Blocks one decoding sequence of max_len tokens holds at most in each
// group: every token's block in the full group; in the sliding group the
// window behind its next token, sliding_window_blocks(window, block, max_len, 1).
KvPoolSizes kv_blocks_per_seq(const KvGroupShape& g, int64_t max_len);
// Bytes of those blocks.
double kv_seq_bytes(const KvGroupShape& g, int64_t max_len);
// Sliding blocks one step needs beyond its sequences' decode windows (0
// without the group): a sequence with n new tokens holds at most
// ceil((n - 1) / block) more than a decoding one, so a step of T tokens over
// S sequences at most ceil(T / block) + S more.
int64_t kv_step_blocks(const KvGroupShape& g);

// The rule that splits a KV budget between the groups: both pools hold the
// same number n of decoding sequences of max_len tokens, and the sliding
// pool one step's kv_step_blocks more (full = floor(n F), sliding = floor(n
// W) + kv_step_blocks for F, W = kv_blocks_per_seq), n = (bytes - the step's
// bytes) / kv_seq_bytes. When the budget holds less than one such sequence,
// the pools of the longest sequence that fits with its largest step (full *
// block_size tokens; the caller caps max_model_len to it). Without a sliding
// group: bytes / full_block_bytes full blocks, as before.
KvPoolSizes split_kv_budget(double bytes, const KvGroupShape& g, int64_t max_len);
// --num-kv-blocks N sets the full group's pool; the sliding pool follows the
// same rule: ceil(N W / F) + kv_step_blocks for sequences of min(max_len, N
// block_size) tokens.
KvPoolSizes kv_pools_for_blocks(int64_t num_full_blocks, const KvGroupShape& g, int64_t max_len);

}  // namespace pagoda
