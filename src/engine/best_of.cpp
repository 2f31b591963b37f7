#include "engine/best_of.h"

#include <algorithm>

namespace pagoda {

namespace {

// Merges the held events of one sample into a single event.
RequestOutput merge_events(std::vector<RequestOutput>& held, int index) {
  RequestOutput out = std::move(held.front());
  for (size_t i = 1; i < held.size(); ++i) {
    RequestOutput& e = held[i];
    out.token_ids.insert(out.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
    out.text += e.text;
    out.logprobs.insert(out.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    out.finish_reason = e.finish_reason;
    out.stop_reason = e.stop_reason;
    out.num_output_tokens = e.num_output_tokens;
  }
  out.index = index;
  return out;
}

}  // namespace

bool holds_outputs(const SamplingParams& params) { return params.best_of.has_value() && *params.best_of > params.n; }

std::vector<RequestOutput> best_of_winners(std::vector<std::unique_ptr<SampleState>>& done, int n) {
  std::stable_sort(done.begin(), done.end(),
                   [](const auto& a, const auto& b) { return a->cumulative_logprob > b->cumulative_logprob; });
  std::vector<RequestOutput> events;
  for (int k = 0; k < n && static_cast<size_t>(k) < done.size(); ++k) {
    auto& held = done[static_cast<size_t>(k)]->held;
    if (!held.empty()) events.push_back(merge_events(held, k));
  }
  return events;
}

}  // namespace pagoda
