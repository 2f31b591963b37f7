#include "model/kv_budget.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/units.h"
#include "kv/sliding_window_blocks.h"

namespace pagoda {

KvBudget cpu_kv_budget(double seq_bytes, double step_bytes, int64_t max_model_len,
                       int64_t max_num_seqs, size_t available, int ranks) {
  ranks = std::max(ranks, 1);
  const double wanted = static_cast<double>(max_num_seqs) * seq_bytes + step_bytes;
  const std::string want_text =
      fmt::format("room for {} seqs x {} tokens", max_num_seqs, max_model_len);
  const double cap = (available > 0 ? kCpuKvAvailableFraction * static_cast<double>(available)
                                    : kCpuKvFallbackBytes) /
                     ranks;
  if (wanted <= cap) return {wanted, want_text};
  const std::string cap_text =
      available > 0
          ? fmt::format("{:.0f}% of the {:.2f} GiB of memory available",
                        100 * kCpuKvAvailableFraction, to_gib(static_cast<double>(available)))
          : fmt::format("{:.2f} GiB (memory available unknown)", to_gib(kCpuKvFallbackBytes));
  const std::string share = ranks > 1 ? fmt::format(", shared by {} ranks", ranks) : "";
  return {cap, fmt::format("{} would take {:.2f} GiB; capped at {}{}", want_text, to_gib(wanted),
                           cap_text, share)};
}

KvBudget explicit_kv_budget(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  return {b, b >= kGiB ? fmt::format("--kv-cache-memory-bytes {:.2f} GiB", to_gib(b))
                       : fmt::format("--kv-cache-memory-bytes {:.1f} MiB", b / (1024.0 * 1024.0))};
}

KvPoolSizes kv_blocks_per_seq(const KvGroupShape& g, int64_t max_len) {
  KvPoolSizes b;
  b.full = (max_len + g.block_size - 1) / g.block_size;
  if (g.window > 0) b.sliding = sliding_window_blocks(g.window, g.block_size, max_len, 1);
  return b;
}

double kv_seq_bytes(const KvGroupShape& g, int64_t max_len) {
  const KvPoolSizes b = kv_blocks_per_seq(g, max_len);
  return static_cast<double>(b.full) * static_cast<double>(g.full_block_bytes) +
         static_cast<double>(b.sliding) * static_cast<double>(g.sliding_block_bytes);
}

int64_t kv_step_blocks(const KvGroupShape& g) {
  if (g.window <= 0) return 0;
  return (g.max_step_tokens + g.block_size - 1) / g.block_size + g.max_step_seqs;
}

namespace {

// Bytes of one sequence of `len` tokens at its largest step: the admission
// minimum of the pools (sliding_window_blocks with the step).
double one_seq_step_bytes(const KvGroupShape& g, int64_t len) {
  return static_cast<double>((len + g.block_size - 1) / g.block_size) *
             static_cast<double>(g.full_block_bytes) +
         static_cast<double>(
             sliding_window_blocks(g.window, g.block_size, len, g.max_step_tokens)) *
             static_cast<double>(g.sliding_block_bytes);
}

}  // namespace

KvPoolSizes split_kv_budget(double bytes, const KvGroupShape& g, int64_t max_len) {
  if (bytes <= 0) return {};
  if (g.window <= 0)
    return {static_cast<int64_t>(bytes / static_cast<double>(g.full_block_bytes)), 0};
  const KvPoolSizes per_seq = kv_blocks_per_seq(g, max_len);
  const double seq = kv_seq_bytes(g, max_len);
  const int64_t step = kv_step_blocks(g);
  const double step_bytes = static_cast<double>(step) * static_cast<double>(g.sliding_block_bytes);
  if (bytes >= seq + step_bytes) {
    const double n = (bytes - step_bytes) / seq;
    return {static_cast<int64_t>(n * static_cast<double>(per_seq.full)),
            static_cast<int64_t>(n * static_cast<double>(per_seq.sliding)) + step};
  }
  // Less than one decoding sequence of max_len and a step: one sequence at
  // its largest step, of max_len tokens when it fits, else of the longest
  // whole-block length that does (the bytes grow with the length).
  auto one_seq = [&](int64_t blocks) {
    return KvPoolSizes{blocks, sliding_window_blocks(g.window, g.block_size, blocks * g.block_size,
                                                     g.max_step_tokens)};
  };
  if (one_seq_step_bytes(g, max_len) <= bytes) return one_seq(per_seq.full);
  int64_t lo = 0, hi = per_seq.full;  // lo blocks fit, hi blocks do not
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (one_seq_step_bytes(g, mid * g.block_size) <= bytes ? lo : hi) = mid;
  }
  return lo == 0 ? KvPoolSizes{} : one_seq(lo);
}

KvPoolSizes kv_pools_for_blocks(int64_t num_full_blocks, const KvGroupShape& g, int64_t max_len) {
  if (g.window <= 0) return {num_full_blocks, 0};
  const KvPoolSizes per_seq =
      kv_blocks_per_seq(g, std::min(max_len, num_full_blocks * g.block_size));
  if (per_seq.full <= 0) return {num_full_blocks, 0};
  return {num_full_blocks, (num_full_blocks * per_seq.sliding + per_seq.full - 1) / per_seq.full +
                               kv_step_blocks(g)};
}

}  // namespace pagoda
