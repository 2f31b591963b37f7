// Per-sequence block tables over BlockPools, with prefix caching, fork and
// copy-on-write. Speaks in "check, then do" pairs: blocks_needed(...) checked
// with fits(...), then allocate(...) / grow(...).
//
// A sequence's table covers its KV slots: token position t lives in slot
//   table[t / block_size] * block_size + t % block_size.
// Positions below num_computed_tokens hold computed KV; positions at and past
// it are written by the next step. Blocks are shared (ref_count > 1) between
// forked sequences and with prefix hits; a shared block is never written:
// grow() first gives the writer a private copy (copy-on-write).
//
// KV groups (a model with both full-attention and sliding-window layers,
// KvConfig::sliding_window > 0): the full layers' KV lives in the full pool
// (block_table), the sliding layers' KV in a second pool of its own
// (sliding_block_table; block ids of the two pools are separate spaces).
// Both tables have the same length. A sliding layer's query at position p
// reads positions (p - window, p] only, so once num_computed tokens are
// computed the next query (position num_computed) never reads a block whose
// last position is below num_computed - window + 1: commit() releases such
// blocks (to the empty list, or to the prefix cache's idle list when cached)
// and leaves kNullBlock in their entries. Entries at and past
// first_sliding_block(num_computed) are always real blocks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace pagoda {

using SeqId = int64_t;

// A sliding-group table entry whose block left the window and was released.
inline constexpr int32_t kNullBlock = -1;

struct KvConfig {
  int32_t num_blocks = 0;   // full-attention group's pool
  int32_t block_size = 16;  // tokens per block (both groups)
  bool enable_prefix_caching = true;
  // > 0: the model's sliding layers form a second group that keeps only the
  // last sliding_window positions, in a pool of num_sliding_blocks blocks.
  int32_t sliding_window = 0;
  int32_t num_sliding_blocks = 0;
};

enum class KvGroup : uint8_t { kFull, kSliding };

// Allocatable blocks an operation consumes (or a pool offers), per group.
struct KvBlocks {
  int32_t full = 0;
  int32_t sliding = 0;
  KvBlocks& operator+=(const KvBlocks& o) {
    full += o.full;
    sliding += o.sliding;
    return *this;
  }
  bool operator==(const KvBlocks&) const = default;
};

// A cached prefix found by find_prefix(): whole blocks only, and never all of
// the query's tokens (at least one token is left to compute so that the
// sequence gets logits).
//
// With a sliding group the hit also needs, in the sliding pool, the cached
// blocks that the next query's window reads (those from
// first_sliding_block(num_tokens) on); a longer full-group hit whose window
// blocks were evicted is shortened to the longest that has them.
struct PrefixHit {
  std::vector<int32_t> blocks;    // cached blocks holding the first num_tokens tokens
  std::vector<BlockHash> hashes;  // [blocks.size()] chained hash of each block
  // [blocks.size()] with a sliding group (else empty): the sliding pool's
  // cached blocks, kNullBlock before the window.
  std::vector<int32_t> sliding_blocks;
  int32_t num_tokens = 0;         // blocks.size() * block_size
  int32_t num_query_tokens = 0;   // length of the looked-up tokens (hit-rate counters)
};

// Copy block src to block dst in every layer of `group` before the step's
// forward pass.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  KvGroup group = KvGroup::kFull;
};

struct KvStats {
  int32_t num_blocks = 0;
  int32_t num_used_blocks = 0;    // referenced by at least one block table
  int32_t num_free_blocks = 0;    // empty
  int32_t num_cached_blocks = 0;  // cached content, no user (evictable)
  int64_t num_evictions = 0;
  int64_t num_query_tokens = 0;  // prompt (+ recomputed output) tokens looked up at admission
  int64_t num_hit_tokens = 0;    // of which found in the prefix cache
  // The sliding group's pool (zero without one).
  int32_t num_sliding_blocks = 0;
  int32_t num_sliding_used_blocks = 0;
  int32_t num_sliding_cached_blocks = 0;
  double hit_rate() const {
    return num_query_tokens ? double(num_hit_tokens) / double(num_query_tokens) : 0.0;
  }
};

class KvManager {
 public:
  explicit KvManager(const KvConfig& config);

  int32_t block_size() const { return config_.block_size; }
  int32_t num_blocks() const { return config_.num_blocks; }
  bool prefix_caching() const { return config_.enable_prefix_caching; }
  bool has_sliding_group() const { return config_.sliding_window > 0; }
  int32_t sliding_window() const { return config_.sliding_window; }
  int32_t num_sliding_blocks() const { return config_.num_sliding_blocks; }
  // Of the full group's pool.
  int32_t num_allocatable_blocks() const { return pool_.num_allocatable_blocks(); }
  KvBlocks allocatable() const {
    return {pool_.num_allocatable_blocks(), sliding_pool_.num_allocatable_blocks()};
  }
  bool fits(const KvBlocks& needed) const {
    KvBlocks have = allocatable();
    return needed.full <= have.full && needed.sliding <= have.sliding;
  }
  // Blocks that cover num_slots slots.
  int32_t num_blocks_for(int32_t num_slots) const {
    return (num_slots + config_.block_size - 1) / config_.block_size;
  }
  // The first sliding-table entry that the query at position num_computed
  // reads (0 without a sliding group).
  int32_t first_sliding_block(int32_t num_computed) const {
    if (!has_sliding_group()) return 0;
    return std::max(0, num_computed - config_.sliding_window + 1) / config_.block_size;
  }
  // Most blocks one sequence ever holds in each group when it reaches
  // max_len tokens in steps of at most max_step_tokens new tokens: the
  // sliding group holds the window behind a step plus the step's own slots.
  KvBlocks max_blocks_per_seq(int64_t max_len, int64_t max_step_tokens) const;

  // Longest cached prefix of `tokens` (with the sequence's extra keys) in
  // whole blocks, leaving at least the last token uncached. No side effects;
  // empty when prefix caching is off.
  PrefixHit find_prefix(std::span<const int32_t> tokens,
                        std::span<const uint64_t> extra_keys) const;

  // Allocatable blocks that allocate(hit, num_slots) would consume: the new
  // blocks plus the hit blocks that are cached idle (they stop being
  // evictable), per group. Sharing between several pending hits is not
  // accounted, so a sum over sequences is an upper bound.
  KvBlocks blocks_needed(const PrefixHit& hit, int32_t num_slots) const;
  // Allocatable blocks that grow(seq, num_slots) would consume: new blocks
  // plus copy-on-write copies of shared blocks in the written range.
  KvBlocks blocks_needed(SeqId seq, int32_t num_slots) const;

  bool can_allocate(const PrefixHit& hit, int32_t num_slots) const {
    return fits(blocks_needed(hit, num_slots));
  }
  bool can_grow(SeqId seq, int32_t num_slots) const { return fits(blocks_needed(seq, num_slots)); }

  // Creates seq's table: the hit blocks (shared), then new blocks up to
  // num_slots slots; num_computed_tokens = hit.num_tokens. Counts the hit in
  // the hit-rate counters. Requires can_allocate(hit, num_slots) and
  // num_slots >= hit.num_tokens.
  void allocate(SeqId seq, const PrefixHit& hit, int32_t num_slots,
                std::span<const uint64_t> extra_keys);
  // Makes seq's table cover num_slots slots for a step that writes positions
  // [num_computed_tokens, num_slots). A shared block in that range is
  // replaced by a private one; when it holds computed positions the (src, dst)
  // pair is appended to `copies` for the engine to apply before the step.
  // Requires can_grow(seq, num_slots).
  void grow(SeqId seq, int32_t num_slots, std::vector<BlockCopy>& copies);
  // Records that seq's first num_computed tokens hold computed KV (their
  // values are tokens[0, num_computed)), inserts every newly full block
  // into the prefix cache (in both groups), then releases the sliding
  // blocks before first_sliding_block(num_computed). num_computed never
  // decreases and stays within the table.
  void commit(SeqId seq, std::span<const int32_t> tokens, int32_t num_computed);
  // Releases the blocks of seq's tables past the first num_blocks_for(num_slots),
  // last first: slots written for speculative drafts that were rejected.
  // Requires num_computed <= num_slots (so no released entry is null).
  void shrink(SeqId seq, int32_t num_slots);
  // child gets parent's table (every block shared), computed count and hashes.
  void fork(SeqId parent, SeqId child);
  // Releases seq's blocks at once, last block first (so that the LRU evicts a
  // prefix's tail before its head).
  void free(SeqId seq);

  bool contains(SeqId seq) const { return seqs_.contains(seq); }
  int32_t num_seqs() const { return static_cast<int32_t>(seqs_.size()); }
  std::span<const int32_t> block_table(SeqId seq) const { return seqs_.at(seq).blocks; }
  // Empty without a sliding group.
  std::span<const int32_t> sliding_block_table(SeqId seq) const { return seqs_.at(seq).sliding; }
  int32_t num_computed_tokens(SeqId seq) const { return seqs_.at(seq).num_computed; }
  int32_t ref_count(int32_t block) const { return pool_.ref_count(block); }
  bool is_cached(int32_t block) const { return pool_.is_cached(block); }
  int32_t sliding_ref_count(int32_t block) const { return sliding_pool_.ref_count(block); }
  bool is_sliding_cached(int32_t block) const { return sliding_pool_.is_cached(block); }
  KvStats stats() const;

  // Integrity check for idle time and tests: ref counts equal the number of
  // tables naming each block (no leak, no double free), every block in
  // exactly one state, the prefix index consistent with the blocks, tables
  // covering their computed tokens, no block twice in one table, sliding
  // tables as long as the full ones with null entries exactly before the
  // window.
  Status check_invariants() const;

 private:
  struct SeqBlocks {
    std::vector<int32_t> blocks;   // the block table (full group)
    std::vector<int32_t> sliding;  // the sliding group's table, or empty
    std::vector<BlockHash>
        hashes;  // chained hashes of the first hashes.size() (full, computed) blocks
    std::vector<uint64_t> extra_keys;
    int32_t num_computed = 0;
  };
  int32_t first_written_block(const SeqBlocks& s) const {
    return s.num_computed / config_.block_size;
  }
  void cache_full_blocks(SeqBlocks& s, std::span<const int32_t> tokens);
  void release_out_of_window(SeqBlocks& s);
  // Of blocks_needed(seq, ...) and grow(): one group's table written from
  // index first_written and grown to `end` entries; new blocks plus private
  // copies of shared blocks in the written range.
  static int32_t table_needs(const BlockPool& pool, std::span<const int32_t> table,
                             int32_t first_written, int32_t end);
  void grow_table(BlockPool& pool, KvGroup group, std::vector<int32_t>& table, int32_t num_computed,
                  int32_t end, std::vector<BlockCopy>& copies);
  // Of find_prefix: shortens a full-group hit to the longest whose window
  // blocks are cached in the sliding pool, and fills hit.sliding_blocks.
  void match_sliding(std::span<const int32_t> tokens, std::span<const uint64_t> extra_keys,
                     PrefixHit& hit) const;
  // Of check_invariants(): one group's table of one sequence; counts its
  // entries into refs (per block of that group's pool).
  Status check_table(const std::string& id, const SeqBlocks& s, KvGroup group,
                     std::vector<int32_t>& refs, std::vector<int32_t>& last_seen,
                     int32_t table) const;

  KvConfig config_;
  BlockPool pool_;
  BlockPool sliding_pool_;  // empty without a sliding group
  std::unordered_map<SeqId, SeqBlocks> seqs_;
  int64_t num_query_tokens_ = 0;
  int64_t num_hit_tokens_ = 0;
};

}  // namespace pagoda
