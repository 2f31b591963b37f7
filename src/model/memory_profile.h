// The dummy step of the startup memory profile: the largest batch the
// runner accepts, run once on a device backend before the KV pool is sized,
// so every lazy allocation (kernel modules, library handles, sampling
// buffers) has happened when free memory is measured.
#pragma once

#include <cstddef>
#include <cstdint>

#include "batch/step_batch.h"

namespace pagoda {

// Top logprobs each profile row asks for (the OpenAI API's maximum), so the
// sampler's result buffers reach their usual size.
constexpr int32_t kProfileTopLogprobs = 20;

struct ProfileStep {
  StepBatch step;
  int64_t num_blocks = 0;   // KV blocks the step uses: ids [0, num_blocks)
  int32_t table_width = 0;  // = step.max_blocks_per_seq
};

// min(max_tokens, max_seqs * max_len) prompt tokens (ids t % vocab) split
// into sequences of at most max_len tokens (at least one sequence), each on
// its own fresh blocks; `num_rows` logits rows (row r samples the last token
// of sequence r % S), each sampled with temperature, top-k, top-p, a
// repetition penalty, a logit bias on one token (so the sampler sizes its
// processed-row scratch too), an allowed-token mask of its own that allows
// every token (the largest mask upload: one mask per row) and
// kProfileTopLogprobs top logprobs. `sliding_group`: the step also carries
// a sliding-window KV group's tables and slots, the same block ids in that
// group's pool (num_blocks there too).
// Requires every size >= 1.
ProfileStep make_profile_step(int64_t max_tokens, int64_t max_seqs, int64_t max_len,
                              int64_t block_size, int64_t num_rows, int64_t vocab,
                              bool sliding_group = false);

// Bytes left for the KV cache on a device where this process may use
// `fraction` of `total` (gpu_memory_utilization): fraction * total minus what
// the process has taken since `free_at_start` (weights, scratch, profile
// allocations), and never more than `free_now` minus kDeviceFreeReserve (for
// graphs and other processes' growth). Memory other processes held at start
// does not count against the fraction, so several engines can share a GPU.
// <= 0: no room.
constexpr double kDeviceFreeReserve = 512.0 * 1024 * 1024;
double device_kv_budget_bytes(double fraction, size_t total, size_t free_at_start, size_t free_now);

}  // namespace pagoda
