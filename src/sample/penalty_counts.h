// PenaltyCounts: one sequence's token counts for the presence, frequency
// and repetition penalties, kept in the layout a SamplingBatch row lists
// them in (batch/sampling_batch.h): ascending token ids, each with its count
// in the output so far and whether it occurs in the prompt.
//
// With flag_prompt (repetition_penalty != 1) every distinct prompt token is
// listed (count 0 unless it was also generated); without it only generated
// tokens are. Appending a token costs a binary search plus, for a new id, an
// insert into the D distinct ids; copying a row out costs O(D); nothing
// depends on the output length.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

class PenaltyCounts {
 public:
  // Counts from scratch: the prompt's distinct tokens (when flag_prompt)
  // and every token of `outputs`. Used at admission (outputs empty) and
  // whenever the sequence's tokens are recounted (preemption).
  void rebuild(std::span<const int32_t> prompt, std::span<const int32_t> outputs, bool flag_prompt);
  // One more output token.
  void add(int32_t token);

  // [D] ascending distinct ids, their output counts and prompt flags (0/1).
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const int32_t> output_counts() const { return counts_; }
  std::span<const uint8_t> in_prompt() const { return in_prompt_; }
  // Output tokens counted so far.
  int64_t num_outputs() const { return num_outputs_; }

 private:
  std::vector<int32_t> tokens_;
  std::vector<int32_t> counts_;
  std::vector<uint8_t> in_prompt_;
  int64_t num_outputs_ = 0;
};

}  // namespace pagoda
