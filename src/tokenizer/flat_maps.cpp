#include "tokenizer/flat_maps.h"

namespace pagoda::tok {

void StringIdMap::insert(std::string_view key, int32_t value) {
  if ((num_entries_ + 1) * 2 > slots_.size()) grow();
  uint64_t h = hash_bytes(key);
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (!s.used) {
      s = {h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), value, true};
      arena_.append(key);
      ++num_entries_;
      return;
    }
    if (s.hash == h && key_of(s) == key) {
      s.value = value;
      return;
    }
  }
}

std::optional<int32_t> StringIdMap::find(std::string_view key, uint64_t hash) const {
  if (slots_.empty()) return std::nullopt;
  size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (!s.used) return std::nullopt;
    if (s.hash == hash && s.length == key.size() && key_of(s) == key) return s.value;
  }
}

void StringIdMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
  size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (!s.used) continue;
    size_t i = s.hash & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void MergeMap::insert(int32_t left, int32_t right, MergeResult merge) {
  if ((num_entries_ + 1) * 2 > slots_.size()) grow();
  uint64_t key = pack(left, right);
  size_t mask = slots_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.key == key) return;
    if (s.key == kEmpty) {
      s = {key, merge};
      ++num_entries_;
      return;
    }
  }
}

void MergeMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
  size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    size_t i = mix(s.key) & mask;
    while (slots_[i].key != kEmpty) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace pagoda::tok
