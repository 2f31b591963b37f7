#include "kv/block_pool.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace pagoda {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      ref_count_(num_blocks, 0),
      content_(num_blocks),
      empty_(num_blocks),
      idle_(num_blocks) {
  for (int32_t b = 0; b < num_blocks; ++b) empty_.push_back(b);
}

int32_t BlockPool::allocate() {
  assert(num_allocatable_blocks() > 0);
  int32_t block;
  if (!empty_.empty()) {
    block = empty_.pop_front();
  } else {
    block = idle_.pop_front();
    evict(block);
  }
  ref_count_[block] = 1;
  ++num_used_;
  return block;
}

void BlockPool::evict(int32_t block) {
  Content& c = content_[block];
  index_.erase(c.hash);
  c = Content{};
  ++num_evictions_;
}

void BlockPool::retain(int32_t block) {
  if (ref_count_[block] == 0) {
    assert(content_[block].cached);  // only cached blocks are reused without allocate()
    idle_.erase(block);
    ++num_used_;
  }
  ++ref_count_[block];
}

void BlockPool::release(int32_t block) {
  assert(ref_count_[block] > 0);
  if (--ref_count_[block] > 0) return;
  --num_used_;
  if (content_[block].cached) {
    idle_.push_back(block);
  } else {
    empty_.push_back(block);
  }
}

int32_t BlockPool::find_cached(const BlockHash& hash, const BlockHash& parent,
                               std::span<const int32_t> tokens,
                               std::span<const uint64_t> extra_keys) const {
  auto it = index_.find(hash);
  if (it == index_.end()) return -1;
  const Content& c = content_[it->second];
  bool same = c.parent == parent && std::ranges::equal(c.tokens, tokens) &&
              std::ranges::equal(c.extra_keys, extra_keys);
  return same ? it->second : -1;
}

bool BlockPool::cache(int32_t block, const BlockHash& hash, const BlockHash& parent,
                      std::span<const int32_t> tokens, std::span<const uint64_t> extra_keys) {
  assert(ref_count_[block] > 0);
  assert(static_cast<int32_t>(tokens.size()) == block_size_);
  Content& c = content_[block];
  if (c.cached || index_.contains(hash)) return false;
  c.cached = true;
  c.hash = hash;
  c.parent = parent;
  c.tokens.assign(tokens.begin(), tokens.end());
  c.extra_keys.assign(extra_keys.begin(), extra_keys.end());
  index_.emplace(hash, block);
  return true;
}

Status BlockPool::check_block(int32_t block, int32_t expected_ref) const {
  const std::string id = "block " + std::to_string(block);
  const Content& c = content_[block];
  int32_t ref = ref_count_[block];
  if (ref != expected_ref) {
    return make_error(ErrorCode::kInternal, id + ": ref_count " + std::to_string(ref) + " but " +
                                                std::to_string(expected_ref) +
                                                " block-table entries");
  }
  bool in_empty = empty_.contains(block), in_idle = idle_.contains(block);
  bool want_empty = ref == 0 && !c.cached, want_idle = ref == 0 && c.cached;
  if (in_empty != want_empty || in_idle != want_idle) {
    return make_error(ErrorCode::kInternal,
                      id + ": wrong free/idle queue membership (leaked or double free)");
  }
  if (c.cached) {
    auto it = index_.find(c.hash);
    if (it == index_.end() || it->second != block) {
      return make_error(ErrorCode::kInternal, id + ": cached but not indexed under its hash");
    }
    if (static_cast<int32_t>(c.tokens.size()) != block_size_) {
      return make_error(ErrorCode::kInternal,
                        id + ": cached with " + std::to_string(c.tokens.size()) + " tokens");
    }
  }
  return Status::Ok();
}

Status BlockPool::check_invariants(std::span<const int32_t> expected_refs) const {
  int32_t num_used = 0, num_cached = 0;
  for (int32_t b = 0; b < num_blocks_; ++b) {
    PAGODA_RETURN_IF_ERROR(check_block(b, expected_refs[b]));
    num_used += ref_count_[b] > 0;
    num_cached += content_[b].cached;
  }
  if (num_used != num_used_ || num_used_ + num_allocatable_blocks() != num_blocks_) {
    return make_error(ErrorCode::kInternal, "block counts: used " + std::to_string(num_used_) +
                                                " (counted " + std::to_string(num_used) +
                                                ") + empty " + std::to_string(empty_.size()) +
                                                " + cached idle " + std::to_string(idle_.size()) +
                                                " != " + std::to_string(num_blocks_));
  }
  if (static_cast<int32_t>(index_.size()) != num_cached) {
    return make_error(ErrorCode::kInternal, "prefix index holds " + std::to_string(index_.size()) +
                                                " hashes but " + std::to_string(num_cached) +
                                                " blocks are cached");
  }
  return Status::Ok();
}

}  // namespace pagoda
