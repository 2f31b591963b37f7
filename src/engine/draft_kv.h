// DraftKv: the paged-KV bookkeeping of a speculative draft's own pool (a
// draft model's, an EAGLE head's): a KvManager without prefix caching whose
// block tables cover each sequence's draft slots, and least-recently-drafted
// eviction when the pool is full.
//
// Recency is counted in propose() calls: begin_call() starts one,
// mark_drafted() stamps a sequence with it. A sequence stamped in the
// current call is never evicted, so a call's own sequences do not push each
// other out; the first of them that does not fit simply goes undrafted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

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
  bool reserve(int64_t seq_id, int32_t num_slots);
  // Releases seq_id's blocks past its first num_slots slots (it must hold blocks).
  void shrink(int64_t seq_id, int32_t num_slots) { kv_.shrink(seq_id, num_slots); }
  // Frees seq_id's blocks, if any, and forgets its recency; on_evict is not called.
  void drop(int64_t seq_id);

  const KvManager& manager() const { return kv_; }
  int32_t block_size() const { return kv_.block_size(); }
  // Sequences evicted by reserve() so far.
  int64_t num_evictions() const { return num_evictions_; }

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
};

}  // namespace pagoda
