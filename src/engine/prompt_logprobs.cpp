#include "engine/prompt_logprobs.h"

#include <algorithm>

#include "engine/token_logprobs.h"

namespace pagoda {

PromptLogprobs::PromptLogprobs(std::optional<int32_t> num_top, size_t prompt_size)
    : num_top_(num_top), entries_(num_top ? prompt_size : 0) {}

std::pair<int32_t, int32_t> PromptLogprobs::row_positions(int32_t start, int32_t num_new) const {
  if (complete()) return {start, start};
  const int32_t end = std::min(start + num_new, static_cast<int32_t>(entries_.size()) - 1);
  return {start, std::max(start, end)};
}

void PromptLogprobs::record(int32_t token_index, std::span<const int32_t> prompt, const SampleOutput& so, size_t r) {
  auto& entry = entries_[static_cast<size_t>(token_index)];
  if (entry) return;  // already computed before a preemption
  const int32_t target = prompt[static_cast<size_t>(token_index)];
  entry = make_token_logprob(so, r, target, so.target_logprobs[r], so.target_ranks[r], *num_top_);
}

void PromptLogprobs::attach_once(RequestOutput& event) {
  if (!wanted() || sent_) return;
  event.prompt_logprobs = entries_;
  sent_ = true;
}

}  // namespace pagoda
