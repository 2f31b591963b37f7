#include "engine/constraint_masks.h"

#include <cassert>

#include "core/thread_pool.h"
#include "sample/token_mask.h"

namespace pagoda {

ConstraintMasks::ConstraintMasks(int64_t vocab_size)
    : num_words_(static_cast<size_t>(mask_num_words(vocab_size))),
      last_word_bits_(vocab_size % 32 == 0 ? ~0u : (1u << (vocab_size % 32)) - 1u) {}

void ConstraintMasks::clear() {
  entries_.clear();
  words_.clear();
}

size_t ConstraintMasks::add(const TokenConstraint& constraint, std::span<const uint32_t> allowed) {
  assert(allowed.empty() || allowed.size() == num_words_);
  entries_.push_back({&constraint, allowed, false});
  return entries_.size() - 1;
}

void ConstraintMasks::compute() {
  words_.assign(entries_.size() * num_words_, 0u);
  if (entries_.size() < kMinParallelEntries) {
    for (size_t i = 0; i < entries_.size(); ++i) compute_entry(i);
    return;
  }
  parallel_for(static_cast<int64_t>(entries_.size()), 1, [this](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) compute_entry(static_cast<size_t>(i));
  });
}

void ConstraintMasks::compute_entry(size_t i) {
  Entry& e = entries_[i];
  std::span<uint32_t> words(words_.data() + i * num_words_, num_words_);
  e.constraint->fill_next_mask(words);
  words[num_words_ - 1] &= last_word_bits_;  // tokens past the vocabulary never sample
  uint32_t any = 0;
  if (e.allowed.empty()) {
    for (uint32_t w : words) any |= w;
  } else {
    for (size_t k = 0; k < num_words_; ++k) any |= (words[k] &= e.allowed[k]);
  }
  e.empty = any == 0;
}

std::span<const uint32_t> ConstraintMasks::mask(size_t i) const {
  if (entries_[i].empty) return {};
  return {words_.data() + i * num_words_, num_words_};
}

}  // namespace pagoda
