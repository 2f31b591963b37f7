// A bounded LRU of token masks keyed by a grammar state's canonical form
// (StackSet::data(), hashed by StackSet::canonicalize()). Outputs that reach
// the same state (the same schema position with the same nesting) share one
// mask instead of walking the vocabulary again. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace pagoda::grammar {

class MaskCache {
 public:
  using Mask = std::vector<uint32_t>;
  explicit MaskCache(size_t capacity) : capacity_(capacity) {}

  // The mask stored for `state`, or null.
  std::shared_ptr<const Mask> find(uint64_t hash, const std::vector<uint32_t>& state);
  // Stores a mask, evicting the least recently used one past capacity.
  void insert(uint64_t hash, const std::vector<uint32_t>& state, std::shared_ptr<const Mask> mask);

  size_t size() const;
  uint64_t num_hits() const;
  uint64_t num_misses() const;

 private:
  struct Entry {
    uint64_t hash;
    std::vector<uint32_t> state;
    std::shared_ptr<const Mask> mask;
  };
  using List = std::list<Entry>;

  const size_t capacity_;
  mutable std::mutex mu_;
  List lru_;  // most recent first
  std::unordered_multimap<uint64_t, List::iterator> index_;
  uint64_t num_hits_ = 0;
  uint64_t num_misses_ = 0;
};

}  // namespace pagoda::grammar
