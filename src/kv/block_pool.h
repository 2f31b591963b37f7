// The physical KV blocks: reference counts, the empty-block list, and the
// prefix-cache index (content hash -> block) with least-recently-used
// eviction of cached blocks that no sequence uses.
//
// Every block is in exactly one state:
//   used         ref_count > 0 (it may also hold cached content)
//   cached idle  ref_count == 0, holds cached content: reusable by a prefix
//                hit, evicted (LRU) when an empty block is needed
//   empty        ref_count == 0, no content
// so num_used + num_cached_idle + num_empty == num_blocks. No block is
// reserved: ids are 0 .. num_blocks-1.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "kv/block_hash.h"
#include "kv/block_queue.h"

namespace pagoda {

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int32_t num_used_blocks() const { return num_used_; }
  int32_t num_cached_idle_blocks() const { return idle_.size(); }
  int32_t num_empty_blocks() const { return empty_.size(); }
  // Blocks allocate() can hand out: empty plus evictable.
  int32_t num_allocatable_blocks() const { return empty_.size() + idle_.size(); }
  int64_t num_evictions() const { return num_evictions_; }

  // Takes a block for new content with ref_count 1: the empty block released
  // longest ago, else evicts the least recently released cached idle block.
  // Requires num_allocatable_blocks() > 0.
  int32_t allocate();
  // Adds a user. A cached idle block becomes used (leaves the LRU queue).
  void retain(int32_t block);
  // Drops a user. At ref_count 0 the block becomes cached idle (most recently
  // released, evicted last) if it holds cached content, else empty.
  void release(int32_t block);
  int32_t ref_count(int32_t block) const { return ref_count_[block]; }

  // The block caching the full block (parent, tokens, extra_keys) whose hash
  // is `hash`, or -1. A hash match counts only when the stored parent hash,
  // tokens and extra keys are equal too.
  int32_t find_cached(const BlockHash& hash, const BlockHash& parent,
                      std::span<const int32_t> tokens, std::span<const uint64_t> extra_keys) const;
  // Records that used block `block` holds the computed full block with this
  // content. Returns false and changes nothing when the block already holds
  // cached content or another block already caches `hash`.
  bool cache(int32_t block, const BlockHash& hash, const BlockHash& parent,
             std::span<const int32_t> tokens, std::span<const uint64_t> extra_keys);
  bool is_cached(int32_t block) const { return content_[block].cached; }
  // The hash a cached block is indexed under (meaningful when is_cached).
  const BlockHash& cached_hash(int32_t block) const { return content_[block].hash; }

  // Checks the state partition, queues, index and counters; `expected_refs`
  // [num_blocks] holds the number of block-table entries naming each block.
  Status check_invariants(std::span<const int32_t> expected_refs) const;

 private:
  struct Content {
    bool cached = false;
    BlockHash hash;
    BlockHash parent;
    std::vector<int32_t> tokens;  // [block_size]
    std::vector<uint64_t> extra_keys;
  };
  void evict(int32_t block);
  Status check_block(int32_t block, int32_t expected_ref) const;

  int32_t num_blocks_;
  int32_t block_size_;
  int32_t num_used_ = 0;
  int64_t num_evictions_ = 0;
  std::vector<int32_t> ref_count_;  // [num_blocks]
  std::vector<Content> content_;    // [num_blocks]
  BlockQueue empty_;                // empty blocks, released longest ago first
  BlockQueue idle_;                 // cached idle blocks, least recently released first
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> index_;  // hash -> caching block
};

}  // namespace pagoda
