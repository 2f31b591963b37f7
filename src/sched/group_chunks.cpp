#include "sched/group_chunks.h"

#include <algorithm>

namespace pagoda {

GroupChunks split_group(std::span<const int32_t> remaining, int32_t budget, int32_t max_chunk) {
  GroupChunks g;
  g.num_new_tokens.assign(remaining.size(), 0);
  int64_t sum = 0;
  bool each_fits = !remaining.empty();
  for (int32_t r : remaining) {
    sum += r;
    each_fits = each_fits && r >= 1 && (max_chunk == 0 || r <= max_chunk);
  }
  if (each_fits && sum <= budget) {
    std::copy(remaining.begin(), remaining.end(), g.num_new_tokens.begin());
    g.total = static_cast<int32_t>(sum);
    g.samples = true;
    return g;
  }
  for (size_t i = 0; i < remaining.size() && g.total < budget; ++i) {
    int32_t n = std::min(remaining[i] - 1, budget - g.total);
    if (max_chunk > 0) n = std::min(n, max_chunk);
    n = std::max(n, 0);
    g.num_new_tokens[i] = n;
    g.total += n;
  }
  return g;
}

}  // namespace pagoda
