// The prompt logprobs of one request (SamplingParams::prompt_logprobs):
// entry p is the logprob of prompt token p given the tokens before it
// (entry 0 has none). The row of prompt position p predicts token p + 1;
// rows are computed in prompt order, possibly over several prefill chunks,
// and an entry computed before a preemption is kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "batch/sampling_batch.h"
#include "engine/engine_api.h"

namespace pagoda {

class PromptLogprobs {
 public:
  PromptLogprobs() = default;  // not requested
  // num_top: the request's prompt_logprobs (unset: not requested).
  PromptLogprobs(std::optional<int32_t> num_top, size_t prompt_size);

  bool wanted() const { return num_top_.has_value(); }
  // Every entry is known (or none was requested).
  bool complete() const { return !wanted() || entries_.size() < 2 || entries_.back().has_value(); }
  // The prompt positions [first, second) whose rows a chunk of `num_new`
  // tokens from position `start` computes (empty once complete()).
  std::pair<int32_t, int32_t> row_positions(int32_t start, int32_t num_new) const;
  // Records entry `token_index` from row r of `so` unless it is known.
  void record(int32_t token_index, std::span<const int32_t> prompt, const SampleOutput& so, size_t r);
  // Copies the entries into `event` the first time it is called (when
  // wanted). They stay: a step planned ahead may still carry rows of a
  // recompute, whose results record() ignores.
  void attach_once(RequestOutput& event);

 private:
  std::optional<int32_t> num_top_;
  std::vector<std::optional<TokenLogprob>> entries_;
  bool sent_ = false;
};

}  // namespace pagoda
