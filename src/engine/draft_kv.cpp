#include "engine/draft_kv.h"

#include <limits>
#include <utility>
#include <vector>

namespace pagoda {

DraftKv::DraftKv(int32_t num_blocks, int32_t block_size, int32_t max_blocks_per_seq,
                 std::function<void(int64_t)> on_evict)
    : kv_(KvConfig{num_blocks, block_size, /*enable_prefix_caching=*/false}),
      max_blocks_per_seq_(max_blocks_per_seq),
      on_evict_(std::move(on_evict)) {}

void DraftKv::drop(int64_t seq_id) {
  if (kv_.contains(seq_id)) kv_.free(seq_id);
  last_drafted_.erase(seq_id);
}

bool DraftKv::reserve(int64_t seq_id, int32_t num_slots) {
  if (kv_.num_blocks_for(num_slots) > max_blocks_per_seq_) return false;
  auto needed = [&] {
    // No sliding group here (full attention only).
    return kv_.contains(seq_id) ? kv_.blocks_needed(seq_id, num_slots).full
                                : kv_.num_blocks_for(num_slots);
  };
  while (needed() > kv_.num_allocatable_blocks()) {
    int64_t victim = 0;
    uint64_t oldest = std::numeric_limits<uint64_t>::max();
    for (const auto& [id, last] : last_drafted_) {
      if (id != seq_id && last < tick_ && last < oldest && kv_.contains(id)) {
        victim = id;
        oldest = last;
      }
    }
    if (oldest == std::numeric_limits<uint64_t>::max()) return false;
    drop(victim);
    ++num_evictions_;
    on_evict_(victim);
  }
  std::vector<BlockCopy> copies;  // stays empty: nothing is shared without prefix caching or forks
  if (kv_.contains(seq_id)) {
    kv_.grow(seq_id, num_slots, copies);
  } else {
    kv_.allocate(seq_id, PrefixHit{}, num_slots, {});
    last_drafted_.try_emplace(seq_id, 0);
  }
  return true;
}

}  // namespace pagoda
