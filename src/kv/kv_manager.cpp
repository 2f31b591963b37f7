#include "kv/kv_manager.h"

#include <algorithm>
#include <cassert>
#include <string>

#include "kv/sliding_window_blocks.h"

namespace pagoda {

KvManager::KvManager(const KvConfig& config)
    : config_(config),
      pool_(config.num_blocks, config.block_size),
      sliding_pool_(config.sliding_window > 0 ? config.num_sliding_blocks : 0, config.block_size) {}

KvBlocks KvManager::max_blocks_per_seq(int64_t max_len, int64_t max_step_tokens) const {
  const int64_t bs = config_.block_size;
  KvBlocks b;
  b.full = static_cast<int32_t>((max_len + bs - 1) / bs);
  if (has_sliding_group())
    b.sliding = static_cast<int32_t>(
        sliding_window_blocks(config_.sliding_window, bs, max_len, max_step_tokens));
  return b;
}

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
  if (has_sliding_group()) match_sliding(tokens, extra_keys, hit);
  hit.num_tokens = static_cast<int32_t>(hit.blocks.size()) * bs;
  return hit;
}

void KvManager::match_sliding(std::span<const int32_t> tokens, std::span<const uint64_t> extra_keys,
                              PrefixHit& hit) const {
  const int32_t bs = config_.block_size;
  const auto num_full = static_cast<int32_t>(hit.blocks.size());
  // found[i]: the sliding pool's block caching full-group block i, or -1;
  // run[i]: how many consecutive blocks ending at i are found.
  std::vector<int32_t> found(num_full), run(num_full);
  for (int32_t i = 0; i < num_full; ++i) {
    const BlockHash& parent = i > 0 ? hit.hashes[i - 1] : kRootBlockHash;
    found[i] = sliding_pool_.find_cached(
        hit.hashes[i], parent, tokens.subspan(static_cast<size_t>(i) * bs, bs), extra_keys);
    run[i] = found[i] < 0 ? 0 : (i > 0 ? run[i - 1] : 0) + 1;
  }
  // The longest hit of h blocks whose window blocks [first, h) are all found.
  int32_t h = num_full;
  while (h > 0 && run[h - 1] < h - first_sliding_block(h * bs)) --h;
  hit.blocks.resize(h);
  hit.hashes.resize(h);
  const int32_t first = first_sliding_block(h * bs);
  hit.sliding_blocks.assign(h, kNullBlock);
  for (int32_t i = first; i < h; ++i) hit.sliding_blocks[i] = found[i];
}

KvBlocks KvManager::blocks_needed(const PrefixHit& hit, int32_t num_slots) const {
  const int32_t num_new =
      std::max(0, num_blocks_for(num_slots) - static_cast<int32_t>(hit.blocks.size()));
  KvBlocks needed{num_new, 0};
  for (int32_t b : hit.blocks) needed.full += pool_.ref_count(b) == 0;
  if (has_sliding_group()) {
    // Every new entry is at or past the hit's window start.
    needed.sliding = num_new;
    for (int32_t b : hit.sliding_blocks)
      needed.sliding += b != kNullBlock && sliding_pool_.ref_count(b) == 0;
  }
  return needed;
}

int32_t KvManager::table_needs(const BlockPool& pool, std::span<const int32_t> table,
                               int32_t first_written, int32_t end) {
  const auto num_have = static_cast<int32_t>(table.size());
  int32_t needed = std::max(0, end - num_have);
  for (int32_t i = first_written; i < std::min(end, num_have); ++i)
    needed += pool.ref_count(table[i]) > 1;
  return needed;
}

KvBlocks KvManager::blocks_needed(SeqId seq, int32_t num_slots) const {
  const SeqBlocks& s = seqs_.at(seq);
  const int32_t end = num_blocks_for(num_slots);
  KvBlocks needed{table_needs(pool_, s.blocks, first_written_block(s), end), 0};
  if (has_sliding_group())
    needed.sliding = table_needs(sliding_pool_, s.sliding, first_written_block(s), end);
  return needed;
}

void KvManager::allocate(SeqId seq, const PrefixHit& hit, int32_t num_slots,
                         std::span<const uint64_t> extra_keys) {
  assert(!seqs_.contains(seq));
  assert(num_slots >= hit.num_tokens);
  assert(can_allocate(hit, num_slots));
  assert(hit.sliding_blocks.size() == (has_sliding_group() ? hit.blocks.size() : 0));
  SeqBlocks& s = seqs_[seq];
  s.extra_keys.assign(extra_keys.begin(), extra_keys.end());
  // Claim the hit's blocks before allocating, so no allocation evicts them.
  for (int32_t b : hit.blocks) {
    pool_.retain(b);
    s.blocks.push_back(b);
  }
  for (int32_t b : hit.sliding_blocks) {
    if (b != kNullBlock) sliding_pool_.retain(b);
    s.sliding.push_back(b);
  }
  s.hashes = hit.hashes;
  s.num_computed = hit.num_tokens;
  const int32_t end = num_blocks_for(num_slots);
  while (static_cast<int32_t>(s.blocks.size()) < end) s.blocks.push_back(pool_.allocate());
  if (has_sliding_group()) {
    while (static_cast<int32_t>(s.sliding.size()) < end)
      s.sliding.push_back(sliding_pool_.allocate());
  }
  num_query_tokens_ += hit.num_query_tokens;
  num_hit_tokens_ += hit.num_tokens;
}

void KvManager::grow_table(BlockPool& pool, KvGroup group, std::vector<int32_t>& table,
                           int32_t num_computed, int32_t end, std::vector<BlockCopy>& copies) {
  const int32_t bs = config_.block_size;
  const auto num_have = static_cast<int32_t>(table.size());
  for (int32_t i = num_computed / bs; i < std::min(end, num_have); ++i) {
    int32_t shared = table[i];
    if (pool.ref_count(shared) == 1) continue;
    int32_t own = pool.allocate();
    // Only the first written block can hold computed positions.
    if (i * bs < num_computed) copies.push_back({shared, own, group});
    pool.release(shared);
    table[i] = own;
  }
  while (static_cast<int32_t>(table.size()) < end) table.push_back(pool.allocate());
}

void KvManager::grow(SeqId seq, int32_t num_slots, std::vector<BlockCopy>& copies) {
  assert(can_grow(seq, num_slots));
  SeqBlocks& s = seqs_.at(seq);
  const int32_t end = num_blocks_for(num_slots);
  grow_table(pool_, KvGroup::kFull, s.blocks, s.num_computed, end, copies);
  if (has_sliding_group())
    grow_table(sliding_pool_, KvGroup::kSliding, s.sliding, s.num_computed, end, copies);
}

void KvManager::commit(SeqId seq, std::span<const int32_t> tokens, int32_t num_computed) {
  SeqBlocks& s = seqs_.at(seq);
  assert(num_computed >= s.num_computed);
  assert(num_computed <= static_cast<int32_t>(s.blocks.size()) * config_.block_size);
  assert(num_computed <= static_cast<int32_t>(tokens.size()));
  s.num_computed = num_computed;
  if (config_.enable_prefix_caching) cache_full_blocks(s, tokens);
  if (has_sliding_group()) release_out_of_window(s);
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
    // Newly full blocks are past the previous window start, so never null.
    if (has_sliding_group())
      (void)sliding_pool_.cache(s.sliding[i], h, parent, block_tokens, s.extra_keys);
    s.hashes.push_back(h);
  }
}

void KvManager::release_out_of_window(SeqBlocks& s) {
  // Entries before the previous window start are null already: walk back
  // from the new start to the first null, then release oldest first (so the
  // prefix cache evicts them first).
  int32_t i = first_sliding_block(s.num_computed);
  while (i > 0 && s.sliding[i - 1] != kNullBlock) --i;
  for (; i < first_sliding_block(s.num_computed); ++i) {
    sliding_pool_.release(s.sliding[i]);
    s.sliding[i] = kNullBlock;
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
  while (s.sliding.size() > keep) {
    assert(s.sliding.back() != kNullBlock);  // keep >= the window start
    sliding_pool_.release(s.sliding.back());
    s.sliding.pop_back();
  }
}

void KvManager::fork(SeqId parent, SeqId child) {
  assert(!seqs_.contains(child));
  SeqBlocks copy = seqs_.at(parent);
  for (int32_t b : copy.blocks) pool_.retain(b);
  for (int32_t b : copy.sliding)
    if (b != kNullBlock) sliding_pool_.retain(b);
  seqs_.emplace(child, std::move(copy));
}

void KvManager::free(SeqId seq) {
  auto it = seqs_.find(seq);
  assert(it != seqs_.end());
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_.release(*b);
  const std::vector<int32_t>& sliding = it->second.sliding;
  for (auto b = sliding.rbegin(); b != sliding.rend(); ++b)
    if (*b != kNullBlock) sliding_pool_.release(*b);
  seqs_.erase(it);
}

KvStats KvManager::stats() const {
  KvStats st;
  st.num_blocks = pool_.num_blocks();
  st.num_used_blocks = pool_.num_used_blocks();
  st.num_free_blocks = pool_.num_empty_blocks();
  st.num_cached_blocks = pool_.num_cached_idle_blocks();
  st.num_evictions = pool_.num_evictions() + sliding_pool_.num_evictions();
  st.num_query_tokens = num_query_tokens_;
  st.num_hit_tokens = num_hit_tokens_;
  st.num_sliding_blocks = sliding_pool_.num_blocks();
  st.num_sliding_used_blocks = sliding_pool_.num_used_blocks();
  st.num_sliding_cached_blocks = sliding_pool_.num_cached_idle_blocks();
  return st;
}

Status KvManager::check_table(const std::string& id, const SeqBlocks& s, KvGroup group,
                              std::vector<int32_t>& refs, std::vector<int32_t>& last_seen,
                              int32_t table) const {
  const bool sliding = group == KvGroup::kSliding;
  const BlockPool& pool = sliding ? sliding_pool_ : pool_;
  const std::vector<int32_t>& blocks = sliding ? s.sliding : s.blocks;
  const std::string what = id + (sliding ? " (sliding group)" : "");
  const auto first_live = static_cast<size_t>(sliding ? first_sliding_block(s.num_computed) : 0);
  for (size_t i = 0; i < blocks.size(); ++i) {
    int32_t b = blocks[i];
    if ((b == kNullBlock) != (i < first_live)) {
      return make_error(ErrorCode::kInternal,
                        what + ": entry " + std::to_string(i) +
                            (b == kNullBlock ? " released inside" : " kept outside") +
                            " the window");
    }
    if (b == kNullBlock) continue;
    if (b < 0 || b >= pool.num_blocks() || last_seen[b] == table) {
      return make_error(ErrorCode::kInternal,
                        what + ": bad or repeated block " + std::to_string(b));
    }
    last_seen[b] = table;
    ++refs[b];
    if (pool.is_cached(b) && (i >= s.hashes.size() || !(pool.cached_hash(b) == s.hashes[i]))) {
      return make_error(ErrorCode::kInternal, what + ": block " + std::to_string(b) + " at index " +
                                                  std::to_string(i) + " caches other content");
    }
  }
  return Status::Ok();
}

Status KvManager::check_invariants() const {
  const int32_t bs = config_.block_size;
  std::vector<int32_t> refs(pool_.num_blocks(), 0), sliding_refs(sliding_pool_.num_blocks(), 0);
  // Table index that last named each block, per pool.
  std::vector<int32_t> last_seen(pool_.num_blocks(), -1);
  std::vector<int32_t> sliding_last_seen(sliding_pool_.num_blocks(), -1);
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
    PAGODA_RETURN_IF_ERROR(check_table(id, s, KvGroup::kFull, refs, last_seen, table));
    if (s.sliding.size() != (has_sliding_group() ? s.blocks.size() : 0)) {
      return make_error(ErrorCode::kInternal,
                        id + ": sliding table of " + std::to_string(s.sliding.size()) +
                            " entries, full table of " + std::to_string(s.blocks.size()));
    }
    PAGODA_RETURN_IF_ERROR(
        check_table(id, s, KvGroup::kSliding, sliding_refs, sliding_last_seen, table));
  }
  PAGODA_RETURN_IF_ERROR(pool_.check_invariants(refs));
  return sliding_pool_.check_invariants(sliding_refs);
}

}  // namespace pagoda
