#include "engine/beam_request.h"

#include <algorithm>

namespace pagoda {

BeamRequest::BeamRequest(const BeamSearchConfig& config, SeqId first_seq) : search_(config), live_{first_seq} {}

void BeamRequest::add_candidates(SeqId seq, const SampleOutput& so, size_t r) {
  candidates_.resize(live_.size());
  auto pos = std::find(live_.begin(), live_.end(), seq);
  auto& list = candidates_[static_cast<size_t>(pos - live_.begin())];
  const size_t k = so.top_ids.size() / std::max<size_t>(1, so.token_ids.size());
  for (size_t j = 0; j < k && j < static_cast<size_t>(search_.num_candidates_per_beam()); ++j) {
    list.push_back({so.top_ids[r * k + j], so.top_logprobs[r * k + j]});
  }
}

std::vector<Branch> BeamRequest::step() {
  const std::vector<BeamChoice> choices = search_.step(candidates_);
  candidates_.clear();
  std::vector<Branch> branches;
  if (search_.done()) return branches;
  for (const BeamChoice& c : choices) branches.push_back({live_[static_cast<size_t>(c.parent)], c.token});
  return branches;
}

}  // namespace pagoda
