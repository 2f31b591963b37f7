#include "spec/random_proposer.h"

namespace pagoda {

Status RandomProposer::propose(std::span<const DraftInput> inputs,
                               std::vector<std::vector<int32_t>>& drafts) {
  drafts.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    drafts[i].clear();
    for (int32_t j = 0; j < inputs[i].max_draft; ++j) {
      // splitmix64: a fresh 64-bit value per draw.
      uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      drafts[i].push_back(static_cast<int32_t>(z % static_cast<uint64_t>(vocab_size_)));
    }
  }
  return Status::Ok();
}

}  // namespace pagoda
