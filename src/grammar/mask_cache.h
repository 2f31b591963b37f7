// A bounded LRU keyed by a grammar state in canonical form (a flat vector of
// positions, e.g. StackSet::data(), with its hash): token masks per matcher
// state, local masks per stack top (token_masks.h). Equal keys are compared
// exactly on a hit, never by hash alone. Thread-safe.
#pragma once

#include <cstdint>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace pagoda::grammar {

template <typename Value>
class StateCache {
 public:
  explicit StateCache(size_t capacity) : capacity_(capacity) {}

  // The value stored for `state`, or null.
  std::shared_ptr<const Value> find(uint64_t hash, const std::vector<uint32_t>& state) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [begin, end] = index_.equal_range(hash);
    for (auto it = begin; it != end; ++it) {
      if (it->second->state != state) continue;
      lru_.splice(lru_.begin(), lru_, it->second);
      ++num_hits_;
      return it->second->value;
    }
    ++num_misses_;
    return nullptr;
  }

  // Stores a value, evicting the least recently used one past capacity.
  void insert(uint64_t hash, const std::vector<uint32_t>& state,
              std::shared_ptr<const Value> value) {
    if (capacity_ == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto [begin, end] = index_.equal_range(hash);
    for (auto it = begin; it != end; ++it) {
      if (it->second->state == state) return;  // another thread stored it first
    }
    lru_.push_front({hash, state, std::move(value)});
    index_.emplace(hash, lru_.begin());
    while (lru_.size() > capacity_) {
      const auto last = std::prev(lru_.end());
      auto [b, e] = index_.equal_range(last->hash);
      for (auto it = b; it != e; ++it) {
        if (it->second == last) {
          index_.erase(it);
          break;
        }
      }
      lru_.pop_back();
    }
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lru_.size();
  }
  uint64_t num_hits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return num_hits_;
  }
  uint64_t num_misses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return num_misses_;
  }

 private:
  struct Entry {
    uint64_t hash;
    std::vector<uint32_t> state;
    std::shared_ptr<const Value> value;
  };
  using List = std::list<Entry>;

  const size_t capacity_;
  mutable std::mutex mu_;
  List lru_;  // most recent first
  std::unordered_multimap<uint64_t, typename List::iterator> index_;
  uint64_t num_hits_ = 0;
  uint64_t num_misses_ = 0;
};

// Packed token masks (sample/token_mask.h layout) by matcher state.
using MaskCache = StateCache<std::vector<uint32_t>>;

}  // namespace pagoda::grammar
