#include "engine/draft_kv.h"

#include <limits>
#include <utility>
#include <vector>

namespace pagoda {

DraftKv::DraftKv(int32_t num_blocks, int32_t block_size, int32_t max_blocks_per_seq,
                 std::function<void(int64_t)> on_evict)
    : kv_(KvConfig{num_blocks, block_size, /*enable_prefix_caching=*/true}),
      max_blocks_per_seq_(max_blocks_per_seq),
      on_evict_(std::move(on_evict)) {}

void DraftKv::drop(int64_t seq_id) {
  if (kv_.contains(seq_id)) kv_.free(seq_id);
  last_drafted_.erase(seq_id);
}

PrefixHit DraftKv::find_cached(std::span<const int32_t> keyed,
                               std::span<const uint64_t> keys) const {
  // KvManager::find_prefix leaves the last token uncached: one more (never
  // hashed) lets every full block of `keyed` match.
  std::vector<int32_t> tokens(keyed.begin(), keyed.end());
  tokens.push_back(0);
  return kv_.find_prefix(tokens, keys);
}

void DraftKv::cache_and_drop(int64_t seq_id, std::span<const int32_t> keyed, int32_t num_rows) {
  if (kv_.contains(seq_id) && num_rows >= kv_.num_computed_tokens(seq_id))
    kv_.commit(seq_id, keyed, num_rows);
  drop(seq_id);  // free(): last block first, so the LRU evicts a prefix's tail first
}

bool DraftKv::reserve(int64_t seq_id, int32_t num_slots, const PrefixHit& hit,
                      std::span<const uint64_t> keys) {
  if (kv_.num_blocks_for(num_slots) > max_blocks_per_seq_) return false;
  auto needed = [&] {
    // No sliding group here (full attention only). Cached idle blocks count
    // as allocatable: the pool evicts them before a sequence is evicted.
    return kv_.contains(seq_id) ? kv_.blocks_needed(seq_id, num_slots).full
                                : kv_.blocks_needed(hit, num_slots).full;
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
  // Stays empty: shared (reused) blocks hold only rows below the table's
  // computed count, which grow() never writes.
  std::vector<BlockCopy> copies;
  if (kv_.contains(seq_id)) {
    kv_.grow(seq_id, num_slots, copies);
  } else {
    kv_.allocate(seq_id, hit, num_slots, keys);
    num_reused_blocks_ += static_cast<int64_t>(hit.blocks.size());
    last_drafted_.try_emplace(seq_id, 0);
  }
  return true;
}

}  // namespace pagoda
