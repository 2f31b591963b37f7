#include "test_proposers.h"

#include <algorithm>

namespace pagoda::test {

Status RecordingsProposer::propose(std::span<const DraftInput> inputs,
                                   std::vector<std::vector<int32_t>>& drafts) {
  drafts.assign(inputs.size(), {});
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::span<const int32_t> have = inputs[i].tokens;
    for (const std::vector<int32_t>& r : recordings_) {
      if (r.size() <= have.size() || !std::equal(have.begin(), have.end(), r.begin())) continue;
      const size_t n = std::min(r.size() - have.size(), static_cast<size_t>(inputs[i].max_draft));
      drafts[i].assign(r.begin() + static_cast<std::ptrdiff_t>(have.size()),
                       r.begin() + static_cast<std::ptrdiff_t>(have.size() + n));
      break;
    }
  }
  return Status::Ok();
}

Status NoisyProposer::propose(std::span<const DraftInput> inputs,
                              std::vector<std::vector<int32_t>>& drafts) {
  PAGODA_RETURN_IF_ERROR(inner_->propose(inputs, drafts));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::vector<int32_t>& d : drafts) {
    for (int32_t& t : d) {
      if (u(rng_) < noise_) t = (t + 1 + static_cast<int32_t>(rng_() % 100)) % vocab_size_;
    }
  }
  return Status::Ok();
}

}  // namespace pagoda::test
