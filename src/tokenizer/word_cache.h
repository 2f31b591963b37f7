// A bounded, thread-safe cache from a pre-tokenized word to its ids, so that
// frequent words skip the merge loop: direct-mapped slots (a new word evicts
// the one in its slot) under striped locks.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::tok {

class WordCache {
 public:
  // Words longer than kMaxWordBytes are never cached.
  static constexpr size_t kMaxWordBytes = 64;

  explicit WordCache(size_t num_slots = 1 << 15);

  // Appends the cached ids of `word` to out and returns true on a hit.
  bool get(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const;
  void put(std::string_view word, uint64_t hash, std::span<const int32_t> ids) const;

 private:
  static constexpr size_t kNumLocks = 64;
  struct Slot {
    uint64_t hash = 0;
    std::string word;  // empty: unused (the empty word is never cached)
    std::vector<int32_t> ids;
  };
  std::mutex& lock_for(size_t slot) const { return locks_[slot % kNumLocks]; }

  size_t mask_;
  mutable std::vector<Slot> slots_;
  mutable std::unique_ptr<std::mutex[]> locks_;
};

}  // namespace pagoda::tok
