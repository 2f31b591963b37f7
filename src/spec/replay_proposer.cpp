#include "spec/replay_proposer.h"

#include <algorithm>

namespace pagoda {

void ReplayProposer::record(std::span<const int32_t> prompt,
                            std::span<const int32_t> continuation) {
  recordings_[std::vector<int32_t>(prompt.begin(), prompt.end())] =
      std::vector<int32_t>(continuation.begin(), continuation.end());
}

Status ReplayProposer::propose(std::span<const DraftInput> inputs,
                               std::vector<std::vector<int32_t>>& drafts) {
  drafts.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DraftInput& in = inputs[i];
    drafts[i].clear();
    const auto prompt = in.tokens.first(static_cast<size_t>(in.num_prompt_tokens));
    auto it = recordings_.find(std::vector<int32_t>(prompt.begin(), prompt.end()));
    if (it == recordings_.end()) continue;
    const std::vector<int32_t>& rec = it->second;
    const auto outputs = in.tokens.subspan(static_cast<size_t>(in.num_prompt_tokens));
    if (outputs.size() >= rec.size() ||
        (!follow_positions_ && !std::equal(outputs.begin(), outputs.end(), rec.begin()))) {
      continue;
    }
    const size_t n = std::min(rec.size() - outputs.size(), static_cast<size_t>(in.max_draft));
    drafts[i].assign(rec.begin() + static_cast<std::ptrdiff_t>(outputs.size()),
                     rec.begin() + static_cast<std::ptrdiff_t>(outputs.size() + n));
  }
  return Status::Ok();
}

}  // namespace pagoda
