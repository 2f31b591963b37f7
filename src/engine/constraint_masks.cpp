#include "engine/constraint_masks.h"

#include <algorithm>
#include <cassert>

#include "core/thread_pool.h"
#include "sample/token_mask.h"

namespace pagoda {

ConstraintMasks::ConstraintMasks(int64_t vocab_size)
    : num_words_(static_cast<size_t>(mask_num_words(vocab_size))),
      last_word_bits_(vocab_size % 32 == 0 ? ~0u : (1u << (vocab_size % 32)) - 1u) {}

void ConstraintMasks::clear() {
  entries_.clear();
  computed_.clear();
  by_key_.clear();
  words_.clear();
}

size_t ConstraintMasks::add(const TokenConstraint& constraint, std::span<const uint32_t> allowed) {
  assert(allowed.empty() || allowed.size() == num_words_);
  entries_.push_back({&constraint, {}, allowed, 0});
  return entries_.size() - 1;
}

void ConstraintMasks::compute() {
  // The shared masks first (a state's first mask is computed here, so in
  // parallel), then one computation per distinct mask.
  for_each_entry(entries_.size(), [this](size_t i) {
    entries_[i].shared = entries_[i].constraint->shared_next_mask();
  });
  computed_.clear();
  by_key_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.shared.base != nullptr) {
      const Key key{e.shared.base.get(), e.shared.extra,
                    e.allowed.empty() ? nullptr : e.allowed.data()};
      const auto [it, added] = by_key_.emplace(key, computed_.size());
      e.computed = it->second;
      if (!added) continue;
    } else {
      e.computed = computed_.size();
    }
    computed_.push_back({i, false});
  }
  words_.assign(computed_.size() * num_words_, 0u);
  for_each_entry(computed_.size(), [this](size_t c) { compute_mask(c); });
}

void ConstraintMasks::for_each_entry(size_t n, const std::function<void(size_t)>& f) {
  if (n < kMinParallelEntries) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  parallel_for(static_cast<int64_t>(n), 1, [&f](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) f(static_cast<size_t>(i));
  });
}

void ConstraintMasks::compute_mask(size_t c) {
  const Entry& e = entries_[computed_[c].entry];
  std::span<uint32_t> words(words_.data() + c * num_words_, num_words_);
  if (e.shared.base != nullptr) {
    const std::vector<uint32_t>& base = *e.shared.base;
    std::copy_n(base.begin(), std::min(base.size(), num_words_), words.begin());
    if (e.shared.extra != nullptr) {
      for (int32_t t : *e.shared.extra) {
        if (t >= 0 && static_cast<size_t>(t >> 5) < num_words_) words[t >> 5] |= 1u << (t & 31);
      }
    }
  } else {
    e.constraint->fill_next_mask(words);
  }
  words[num_words_ - 1] &= last_word_bits_;  // tokens past the vocabulary never sample
  uint32_t any = 0;
  if (e.allowed.empty()) {
    for (uint32_t w : words) any |= w;
  } else {
    for (size_t k = 0; k < num_words_; ++k) any |= (words[k] &= e.allowed[k]);
  }
  computed_[c].empty = any == 0;
}

std::span<const uint32_t> ConstraintMasks::mask(size_t i) const {
  const size_t c = entries_[i].computed;
  if (computed_[c].empty) return {};
  return {words_.data() + c * num_words_, num_words_};
}

}  // namespace pagoda
