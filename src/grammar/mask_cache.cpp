#include "grammar/mask_cache.h"

namespace pagoda::grammar {

std::shared_ptr<const MaskCache::Mask> MaskCache::find(uint64_t hash,
                                                       const std::vector<uint32_t>& state) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [begin, end] = index_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second->state != state) continue;
    lru_.splice(lru_.begin(), lru_, it->second);
    ++num_hits_;
    return it->second->mask;
  }
  ++num_misses_;
  return nullptr;
}

void MaskCache::insert(uint64_t hash, const std::vector<uint32_t>& state,
                       std::shared_ptr<const Mask> mask) {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto [begin, end] = index_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second->state == state) return;  // another thread stored it first
  }
  lru_.push_front({hash, state, std::move(mask)});
  index_.emplace(hash, lru_.begin());
  while (lru_.size() > capacity_) {
    const Entry& old = lru_.back();
    auto [b, e] = index_.equal_range(old.hash);
    for (auto it = b; it != e; ++it) {
      if (it->second == std::prev(lru_.end())) {
        index_.erase(it);
        break;
      }
    }
    lru_.pop_back();
  }
}

size_t MaskCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

uint64_t MaskCache::num_hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_hits_;
}

uint64_t MaskCache::num_misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_misses_;
}

}  // namespace pagoda::grammar
