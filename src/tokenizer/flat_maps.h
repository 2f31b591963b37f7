// Open-addressing hash maps for the hot paths of tokenization: token text ->
// id, and (left id, right id) -> merge. Built once at load, then read-only
// (safe to query from many threads).
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::tok {

inline uint64_t hash_bytes(std::string_view s) {
  return XXH3_64bits(s.data(), s.size());
}

// Maps byte strings to int32 values. Keys are stored back to back in one arena.
class StringIdMap {
 public:
  // Inserts or overwrites.
  void insert(std::string_view key, int32_t value);
  std::optional<int32_t> find(std::string_view key) const { return find(key, hash_bytes(key)); }
  std::optional<int32_t> find(std::string_view key, uint64_t hash) const;
  size_t size() const { return num_entries_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint32_t length = 0;
    int32_t value = 0;
    bool used = false;
  };
  void grow();
  std::string_view key_of(const Slot& s) const { return {arena_.data() + s.offset, s.length}; }

  std::vector<Slot> slots_;
  std::string arena_;
  size_t num_entries_ = 0;
};

struct MergeResult {
  int32_t rank;
  int32_t new_id;
};

// Maps an ordered pair of token ids to the merge that joins them.
class MergeMap {
 public:
  // Keeps the first (lowest rank) entry for a pair.
  void insert(int32_t left, int32_t right, MergeResult merge);
  const MergeResult* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    uint64_t key = pack(left, right);
    size_t mask = slots_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.merge;
      if (s.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return num_entries_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    MergeResult merge{};
  };
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  void grow();

  std::vector<Slot> slots_;
  size_t num_entries_ = 0;
};

}  // namespace pagoda::tok
