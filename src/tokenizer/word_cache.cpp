#include "tokenizer/word_cache.h"

namespace pagoda::tok {

WordCache::WordCache(size_t num_slots)
    : mask_(num_slots - 1), slots_(num_slots), locks_(new std::mutex[kNumLocks]) {}

bool WordCache::get(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const {
  size_t i = hash & mask_;
  std::lock_guard<std::mutex> lock(lock_for(i));
  const Slot& s = slots_[i];
  if (s.hash != hash || s.word != word || s.word.empty()) return false;
  out.insert(out.end(), s.ids.begin(), s.ids.end());
  return true;
}

void WordCache::put(std::string_view word, uint64_t hash, std::span<const int32_t> ids) const {
  if (word.empty() || word.size() > kMaxWordBytes) return;
  size_t i = hash & mask_;
  std::lock_guard<std::mutex> lock(lock_for(i));
  Slot& s = slots_[i];
  s.hash = hash;
  s.word.assign(word);
  s.ids.assign(ids.begin(), ids.end());
}

}  // namespace pagoda::tok
