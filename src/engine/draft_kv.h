// DraftKv: the paged-KV bookkeeping of a speculative draft's own pool (a
// draft model's, an EAGLE head's): a KvManager whose block tables cover each
// sequence's draft slots, and least-recently-drafted eviction when the pool
// is full.
//
// Cached blocks (an EAGLE head's KV reused across requests): the owner keys
// a sequence's rows by `keyed` tokens and keys of its choice (row i's
// content must depend only on keyed[0, i] and the keys) and hands them to
// the KvManager's prefix cache at the sequence's end (cache_and_drop):
// its full blocks stay in the pool as cached idle blocks, which a later
// sequence with the same keyed prefix reuses (find_cached, then reserve with
// the hit: shared, ref-counted, never written) and which are evicted, least
// recently released first, when the pool needs room -- before any
// sequence's state is, and never while a table holds them. A sequence
// whose owner never calls cache_and_drop (a draft model's) caches nothing.
//
// Recency is counted in propose() calls: begin_call() starts one,
// mark_drafted() stamps a sequence with it. A sequence stamped in the
// current call is never evicted, so a call's own sequences do not push each
// other out; the first of them that does not fit simply goes undrafted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>

#include "kv/kv_manager.h"

namespace pagoda {

class DraftKv {
 public:
  // A pool of num_blocks blocks of block_size slots; a table holds at most
  // max_blocks_per_seq blocks (the runner's width). on_evict(seq_id) is
  // called for each sequence reserve() evicts, after its blocks are freed,
  // so the owner drops its state for it.
  DraftKv(int32_t num_blocks, int32_t block_size, int32_t max_blocks_per_seq,
          std::function<void(int64_t)> on_evict);

  // Starts a propose() call: the sequences marked before it become evictable.
  void begin_call() { ++tick_; }
  // seq_id is drafted in the current call (protects it from eviction).
  void mark_drafted(int64_t seq_id) { last_drafted_[seq_id] = tick_; }

  // Makes seq_id's table cover num_slots slots (allocated, or grown; never
  // shrunk). While the pool lacks blocks, evicts the least recently drafted
  // sequence holding blocks that is neither seq_id nor drafted in the
  // current call (among equally old ones, the lowest id). False, seq_id's
  // table unchanged, when num_slots is wider than a table or nothing is left
  // to evict (the sequences evicted so far stay evicted).
  // A new seq_id's table starts with hit's blocks (find_cached: shared,
  // rows [0, hit.num_tokens) computed; num_slots >= hit.num_tokens) and
  // records `keys` for cache_and_drop; an existing one ignores both.
  bool reserve(int64_t seq_id, int32_t num_slots, const PrefixHit& hit = {},
               std::span<const uint64_t> keys = {});
  // The longest run of cached full blocks whose rows are those of `keyed`
  // under `keys` (every full block of it may match: unlike the target's
  // lookup, no row needs to be left to compute). No side effects.
  PrefixHit find_cached(std::span<const int32_t> keyed, std::span<const uint64_t> keys) const;
  // Caches seq_id's full blocks among its first num_rows rows (rows i <
  // num_rows computed, content keyed by keyed[0, i] and reserve's keys;
  // num_rows <= keyed.size(), at least the rows it reused), then drops it.
  void cache_and_drop(int64_t seq_id, std::span<const int32_t> keyed, int32_t num_rows);
  // Releases seq_id's blocks past its first num_slots slots (it must hold blocks).
  void shrink(int64_t seq_id, int32_t num_slots) { kv_.shrink(seq_id, num_slots); }
  // Frees seq_id's blocks, if any, and forgets its recency; on_evict is not called.
  void drop(int64_t seq_id);

  const KvManager& manager() const { return kv_; }
  int32_t block_size() const { return kv_.block_size(); }
  // Sequences evicted by reserve() so far.
  int64_t num_evictions() const { return num_evictions_; }
  // Cached blocks reserve() has started tables with so far.
  int64_t num_reused_blocks() const { return num_reused_blocks_; }

 private:
  KvManager kv_;
  int32_t max_blocks_per_seq_;
  std::function<void(int64_t)> on_evict_;
  // The call that last drafted each sequence holding blocks (0: none yet),
  // and of marked sequences whose reserve() is pending. Ordered by id: ties
  // evict the lowest id.
  std::map<int64_t, uint64_t> last_drafted_;
  uint64_t tick_ = 0;
  int64_t num_evictions_ = 0;
  int64_t num_reused_blocks_ = 0;
};

}  // namespace pagoda
