#include "model/kv_budget.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/units.h"

namespace pagoda {

KvBudget cpu_kv_budget(int64_t block_bytes, int64_t block_size, int64_t max_model_len,
                       int64_t max_num_seqs, size_t available, int ranks) {
  ranks = std::max(ranks, 1);
  const int64_t blocks_per_seq = (max_model_len + block_size - 1) / block_size;
  const double wanted = static_cast<double>(max_num_seqs) * static_cast<double>(blocks_per_seq) *
                        static_cast<double>(block_bytes);
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

}  // namespace pagoda
