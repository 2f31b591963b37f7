// Per-sequence block tables over a BlockPool, with prefix caching, fork and
// copy-on-write. Speaks in "check, then do" pairs: blocks_needed(...) against
// num_allocatable_blocks(), then allocate(...) / grow(...).
//
// A sequence's table covers its KV slots: token position t lives in slot
//   table[t / block_size] * block_size + t % block_size.
// Positions below num_computed_tokens hold computed KV; positions at and past
// it are written by the next step. Blocks are shared (ref_count > 1) between
// forked sequences and with prefix hits; a shared block is never written:
// grow() first gives the writer a private copy (copy-on-write).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace pagoda {

using SeqId = int64_t;

struct KvConfig {
  int32_t num_blocks = 0;
  int32_t block_size = 16;  // tokens per block
  bool enable_prefix_caching = true;
};

// A cached prefix found by find_prefix(): whole blocks only, and never all of
// the query's tokens (at least one token is left to compute so that the
// sequence gets logits).
struct PrefixHit {
  std::vector<int32_t> blocks;    // cached blocks holding the first num_tokens tokens
  std::vector<BlockHash> hashes;  // [blocks.size()] chained hash of each block
  int32_t num_tokens = 0;         // blocks.size() * block_size
  int32_t num_query_tokens = 0;   // length of the looked-up tokens (hit-rate counters)
};

// Copy block src to block dst in every layer before the step's forward pass.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

struct KvStats {
  int32_t num_blocks = 0;
  int32_t num_used_blocks = 0;    // referenced by at least one block table
  int32_t num_free_blocks = 0;    // empty
  int32_t num_cached_blocks = 0;  // cached content, no user (evictable)
  int64_t num_evictions = 0;
  int64_t num_query_tokens = 0;  // prompt (+ recomputed output) tokens looked up at admission
  int64_t num_hit_tokens = 0;    // of which found in the prefix cache
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
  int32_t num_allocatable_blocks() const { return pool_.num_allocatable_blocks(); }
  // Blocks that cover num_slots slots.
  int32_t num_blocks_for(int32_t num_slots) const {
    return (num_slots + config_.block_size - 1) / config_.block_size;
  }

  // Longest cached prefix of `tokens` (with the sequence's extra keys) in
  // whole blocks, leaving at least the last token uncached. No side effects;
  // empty when prefix caching is off.
  PrefixHit find_prefix(std::span<const int32_t> tokens,
                        std::span<const uint64_t> extra_keys) const;

  // Allocatable blocks that allocate(hit, num_slots) would consume: the new
  // blocks plus the hit blocks that are cached idle (they stop being
  // evictable). Sharing between several pending hits is not accounted, so a
  // sum over sequences is an upper bound.
  int32_t blocks_needed(const PrefixHit& hit, int32_t num_slots) const;
  // Allocatable blocks that grow(seq, num_slots) would consume: new blocks
  // plus copy-on-write copies of shared blocks in the written range.
  int32_t blocks_needed(SeqId seq, int32_t num_slots) const;

  bool can_allocate(const PrefixHit& hit, int32_t num_slots) const {
    return blocks_needed(hit, num_slots) <= num_allocatable_blocks();
  }
  bool can_grow(SeqId seq, int32_t num_slots) const {
    return blocks_needed(seq, num_slots) <= num_allocatable_blocks();
  }

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
  // values are tokens[0, num_computed)), and inserts every newly full block
  // into the prefix cache. num_computed never decreases and stays within the
  // table.
  void commit(SeqId seq, std::span<const int32_t> tokens, int32_t num_computed);
  // Releases the blocks of seq's table past the first num_blocks_for(num_slots),
  // last first: slots written for speculative drafts that were rejected.
  // Requires num_computed <= num_slots.
  void shrink(SeqId seq, int32_t num_slots);
  // child gets parent's table (every block shared), computed count and hashes.
  void fork(SeqId parent, SeqId child);
  // Releases seq's blocks at once, last block first (so that the LRU evicts a
  // prefix's tail before its head).
  void free(SeqId seq);

  bool contains(SeqId seq) const { return seqs_.contains(seq); }
  int32_t num_seqs() const { return static_cast<int32_t>(seqs_.size()); }
  std::span<const int32_t> block_table(SeqId seq) const { return seqs_.at(seq).blocks; }
  int32_t num_computed_tokens(SeqId seq) const { return seqs_.at(seq).num_computed; }
  int32_t ref_count(int32_t block) const { return pool_.ref_count(block); }
  bool is_cached(int32_t block) const { return pool_.is_cached(block); }
  KvStats stats() const;

  // Integrity check for idle time and tests: ref counts equal the number of
  // tables naming each block (no leak, no double free), every block in
  // exactly one state, the prefix index consistent with the blocks, tables
  // covering their computed tokens, no block twice in one table.
  Status check_invariants() const;

 private:
  struct SeqBlocks {
    std::vector<int32_t> blocks;  // the block table
    std::vector<BlockHash>
        hashes;  // chained hashes of the first hashes.size() (full, computed) blocks
    std::vector<uint64_t> extra_keys;
    int32_t num_computed = 0;
  };
  int32_t first_written_block(const SeqBlocks& s) const {
    return s.num_computed / config_.block_size;
  }
  void cache_full_blocks(SeqBlocks& s, std::span<const int32_t> tokens);

  KvConfig config_;
  BlockPool pool_;
  std::unordered_map<SeqId, SeqBlocks> seqs_;
  int64_t num_query_tokens_ = 0;
  int64_t num_hit_tokens_ = 0;
};

}  // namespace pagoda
