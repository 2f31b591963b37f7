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
#include <span>
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
  // Returns the entry's index. The constraint must outlive compute().
  size_t add(const TokenConstraint& constraint, std::span<const uint32_t> allowed);
  // Computes every queued entry. fill_next_mask runs concurrently on
  // distinct constraint states when there are kMinParallelEntries or more.
  void compute();
  // Entry i's mask (ceil(V / 32) words) after compute(); an empty span when
  // it allows no token: the constraint allows none of the request's
  // allowed_token_ids (or, a bug, nothing at all), and the row cannot
  // sample within both.
  std::span<const uint32_t> mask(size_t i) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    const TokenConstraint* constraint;
    std::span<const uint32_t> allowed;
    bool empty;
  };
  void compute_entry(size_t i);

  size_t num_words_;
  uint32_t last_word_bits_;  // the bits of the last word inside the vocabulary
  std::vector<Entry> entries_;
  std::vector<uint32_t> words_;  // [entries, num_words_]
};

}  // namespace pagoda
