// The allowed-token masks of one step's structured-output rows: each
// constrained sample's next-token set (TokenConstraint::fill_next_mask)
// intersected with its request's allowed_token_ids mask. The row planner
// queues one entry per constraint state that samples in the step, computes
// them together -- on the CPU thread pool (core/thread_pool.h) when there are
// many -- and hands each row its mask (sampling_rows.h then stores equal
// masks once). Masks are built on the engine thread before the step's
// sampler is launched: for a step planned ahead, after the previous step's
// tokens are applied, while the step's forward runs (engine_step.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "sample/token_constraint.h"

namespace pagoda {

class ConstraintMasks {
 public:
  // Entries at least this many are computed in parallel (a grammar's mask
  // costs tens of microseconds at a 128k vocabulary; the pool's hand-off a few).
  static constexpr size_t kMinParallelEntries = 8;

  // Masks over a vocabulary of `vocab_size` tokens (the logits' width).
  explicit ConstraintMasks(int64_t vocab_size);

  // Drops every entry; the buffers keep their capacity (reused step to step).
  void clear();
  // Queues the mask of `constraint` (its next tokens) intersected with
  // `allowed` (a packed mask of the same width; empty: no restriction).
  // Returns the entry's index. The constraint and `allowed` must outlive
  // compute().
  size_t add(const TokenConstraint& constraint, std::span<const uint32_t> allowed);
  // Computes every queued entry: entries whose constraints share their mask
  // (TokenConstraint::shared_next_mask: equal base and extra) and have the
  // same `allowed` data are computed once and hand out the same words, so a
  // step builds each distinct grammar mask once however many rows are in
  // its state. shared_next_mask, fill_next_mask and the distinct masks run
  // concurrently on distinct states when there are kMinParallelEntries or
  // more.
  void compute();
  // The number of distinct masks the last compute() built.
  size_t num_computed() const { return computed_.size(); }
  // Entry i's mask (ceil(V / 32) words) after compute(); an empty span when
  // it allows no token: the constraint allows none of the request's
  // allowed_token_ids (or, a bug, nothing at all), and the row cannot
  // sample within both.
  std::span<const uint32_t> mask(size_t i) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    const TokenConstraint* constraint;
    TokenConstraint::SharedMask shared;  // set by compute(); null base: fill_next_mask
    std::span<const uint32_t> allowed;
    size_t computed;  // its mask in computed_
  };
  struct Computed {
    size_t entry;  // the first entry with this mask
    bool empty;    // allows no token
  };
  // A shared mask's identity: base, extra ids, allowed data.
  using Key = std::tuple<const void*, const void*, const void*>;
  // f(0..n-1), on the thread pool from kMinParallelEntries on.
  static void for_each_entry(size_t n, const std::function<void(size_t)>& f);
  void compute_mask(size_t c);

  size_t num_words_;
  uint32_t last_word_bits_;  // the bits of the last word inside the vocabulary
  std::vector<Entry> entries_;
  std::vector<Computed> computed_;
  std::map<Key, size_t> by_key_;  // shared masks -> computed_ index
  std::vector<uint32_t> words_;   // [computed_, num_words_]
};

}  // namespace pagoda
