#include "kv/kv_manager.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace pagoda {

KvManager::KvManager(const KvConfig& config)
    : config_(config), pool_(config.num_blocks, config.block_size) {}

PrefixHit KvManager::find_prefix(std::span<const int32_t> tokens,
                                 std::span<const uint64_t> extra_keys) const {
  PrefixHit hit;
  hit.num_query_tokens = static_cast<int32_t>(tokens.size());
  if (!config_.enable_prefix_caching || tokens.empty()) return hit;
  const int32_t bs = config_.block_size;
  const int32_t max_blocks = (static_cast<int32_t>(tokens.size()) - 1) / bs;
  BlockHash parent = kRootBlockHash;
  for (int32_t i = 0; i < max_blocks; ++i) {
    auto block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    BlockHash h = hash_block(parent, block_tokens, extra_keys);
    int32_t block = pool_.find_cached(h, parent, block_tokens, extra_keys);
    if (block < 0) break;
    hit.blocks.push_back(block);
    hit.hashes.push_back(h);
    parent = h;
  }
  hit.num_tokens = static_cast<int32_t>(hit.blocks.size()) * bs;
  return hit;
}

int32_t KvManager::blocks_needed(const PrefixHit& hit, int32_t num_slots) const {
  int32_t needed = std::max(0, num_blocks_for(num_slots) - static_cast<int32_t>(hit.blocks.size()));
  for (int32_t b : hit.blocks) needed += pool_.ref_count(b) == 0;
  return needed;
}

int32_t KvManager::blocks_needed(SeqId seq, int32_t num_slots) const {
  const SeqBlocks& s = seqs_.at(seq);
  const int32_t num_have = static_cast<int32_t>(s.blocks.size());
  const int32_t end = num_blocks_for(num_slots);
  int32_t needed = std::max(0, end - num_have);
  for (int32_t i = first_written_block(s); i < std::min(end, num_have); ++i) {
    needed += pool_.ref_count(s.blocks[i]) > 1;
  }
  return needed;
}

void KvManager::allocate(SeqId seq, const PrefixHit& hit, int32_t num_slots,
                         std::span<const uint64_t> extra_keys) {
  assert(!seqs_.contains(seq));
  assert(num_slots >= hit.num_tokens);
  assert(can_allocate(hit, num_slots));
  SeqBlocks& s = seqs_[seq];
  s.extra_keys.assign(extra_keys.begin(), extra_keys.end());
  for (int32_t b : hit.blocks) {
    pool_.retain(b);
    s.blocks.push_back(b);
  }
  s.hashes = hit.hashes;
  s.num_computed = hit.num_tokens;
  while (static_cast<int32_t>(s.blocks.size()) < num_blocks_for(num_slots))
    s.blocks.push_back(pool_.allocate());
  num_query_tokens_ += hit.num_query_tokens;
  num_hit_tokens_ += hit.num_tokens;
}

void KvManager::grow(SeqId seq, int32_t num_slots, std::vector<BlockCopy>& copies) {
  assert(can_grow(seq, num_slots));
  SeqBlocks& s = seqs_.at(seq);
  const int32_t end = num_blocks_for(num_slots);
  const int32_t num_have = static_cast<int32_t>(s.blocks.size());
  for (int32_t i = first_written_block(s); i < std::min(end, num_have); ++i) {
    int32_t shared = s.blocks[i];
    if (pool_.ref_count(shared) == 1) continue;
    int32_t own = pool_.allocate();
    // Only the first written block can hold computed positions.
    if (i * config_.block_size < s.num_computed) copies.push_back({shared, own});
    pool_.release(shared);
    s.blocks[i] = own;
  }
  while (static_cast<int32_t>(s.blocks.size()) < end) s.blocks.push_back(pool_.allocate());
}

void KvManager::commit(SeqId seq, std::span<const int32_t> tokens, int32_t num_computed) {
  SeqBlocks& s = seqs_.at(seq);
  assert(num_computed >= s.num_computed);
  assert(num_computed <= static_cast<int32_t>(s.blocks.size()) * config_.block_size);
  assert(num_computed <= static_cast<int32_t>(tokens.size()));
  s.num_computed = num_computed;
  if (config_.enable_prefix_caching) cache_full_blocks(s, tokens);
}

void KvManager::cache_full_blocks(SeqBlocks& s, std::span<const int32_t> tokens) {
  const int32_t bs = config_.block_size;
  const int32_t num_full = s.num_computed / bs;
  for (int32_t i = static_cast<int32_t>(s.hashes.size()); i < num_full; ++i) {
    BlockHash parent = i > 0 ? s.hashes[i - 1] : kRootBlockHash;
    auto block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    BlockHash h = hash_block(parent, block_tokens, s.extra_keys);
    // false when another block already caches this content: ours stays private.
    (void)pool_.cache(s.blocks[i], h, parent, block_tokens, s.extra_keys);
    s.hashes.push_back(h);
  }
}

void KvManager::shrink(SeqId seq, int32_t num_slots) {
  SeqBlocks& s = seqs_.at(seq);
  assert(num_slots >= s.num_computed);
  const auto keep = static_cast<size_t>(num_blocks_for(num_slots));
  while (s.blocks.size() > keep) {
    pool_.release(s.blocks.back());
    s.blocks.pop_back();
  }
}

void KvManager::fork(SeqId parent, SeqId child) {
  assert(!seqs_.contains(child));
  SeqBlocks copy = seqs_.at(parent);
  for (int32_t b : copy.blocks) pool_.retain(b);
  seqs_.emplace(child, std::move(copy));
}

void KvManager::free(SeqId seq) {
  auto it = seqs_.find(seq);
  assert(it != seqs_.end());
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_.release(*b);
  seqs_.erase(it);
}

KvStats KvManager::stats() const {
  KvStats st;
  st.num_blocks = pool_.num_blocks();
  st.num_used_blocks = pool_.num_used_blocks();
  st.num_free_blocks = pool_.num_empty_blocks();
  st.num_cached_blocks = pool_.num_cached_idle_blocks();
  st.num_evictions = pool_.num_evictions();
  st.num_query_tokens = num_query_tokens_;
  st.num_hit_tokens = num_hit_tokens_;
  return st;
}

Status KvManager::check_invariants() const {
  const int32_t bs = config_.block_size;
  std::vector<int32_t> refs(config_.num_blocks, 0);
  std::vector<int32_t> last_seen(config_.num_blocks, -1);  // table index that last named each block
  int32_t table = 0;
  for (const auto& [seq, s] : seqs_) {
    ++table;
    const std::string id = "seq " + std::to_string(seq);
    if (static_cast<int64_t>(s.blocks.size()) * bs < s.num_computed) {
      return make_error(
          ErrorCode::kInternal,
          id + ": table does not cover its " + std::to_string(s.num_computed) + " computed tokens");
    }
    int32_t num_full = s.num_computed / bs;
    int32_t want_hashed = config_.enable_prefix_caching ? num_full : 0;
    if (static_cast<int32_t>(s.hashes.size()) != want_hashed) {
      return make_error(ErrorCode::kInternal, id + ": " + std::to_string(s.hashes.size()) +
                                                  " hashed blocks, expected " +
                                                  std::to_string(want_hashed));
    }
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      int32_t b = s.blocks[i];
      if (b < 0 || b >= config_.num_blocks || last_seen[b] == table) {
        return make_error(ErrorCode::kInternal,
                          id + ": bad or repeated block " + std::to_string(b));
      }
      last_seen[b] = table;
      ++refs[b];
      if (pool_.is_cached(b) && (i >= s.hashes.size() || !(pool_.cached_hash(b) == s.hashes[i]))) {
        return make_error(ErrorCode::kInternal, id + ": block " + std::to_string(b) + " at index " +
                                                    std::to_string(i) + " caches other content");
      }
    }
  }
  return pool_.check_invariants(refs);
}

}  // namespace pagoda
