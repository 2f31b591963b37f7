#include "sample/beam_search.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace pagoda {

BeamSearch::BeamSearch(const BeamSearchConfig& config)
    : config_(config),
      num_keep_(std::max<int32_t>(2, 1 + static_cast<int32_t>(config.eos_token_ids.size())) *
                config.beam_width),
      beams_(1) {}

float BeamSearch::length_score(float sum, int32_t length) const {
  return sum / static_cast<float>(std::pow(static_cast<double>(length),
                                           static_cast<double>(config_.length_penalty)));
}

std::vector<BeamSearch::Continuation> BeamSearch::top_continuations(
    std::span<const std::vector<BeamCandidate>> candidates) const {
  const bool at_max_length = num_generated_ + 1 >= config_.max_new_tokens;
  const auto& eos = config_.eos_token_ids;
  std::vector<Continuation> all;
  for (size_t i = 0; i < candidates.size(); ++i) {
    for (const BeamCandidate& c : candidates[i]) {
      bool is_eos = std::find(eos.begin(), eos.end(), c.token) != eos.end();
      all.push_back({static_cast<int32_t>(i), c.token, beams_[i].sum_logprobs + c.logprob,
                     is_eos || at_max_length});
    }
  }
  // Best sum first; ties towards the lower (beam, token), like a flattened top-k.
  std::sort(all.begin(), all.end(), [](const Continuation& a, const Continuation& b) {
    if (a.sum != b.sum) return a.sum > b.sum;
    return a.parent != b.parent ? a.parent < b.parent : a.token < b.token;
  });
  if (static_cast<int32_t>(all.size()) > num_keep_) all.resize(num_keep_);
  return all;
}

// Ended continuations among the top beam_width become hypotheses, unless
// early stopping closed the finished set. (With early_stopping = true a full
// set ends the search at once, so it never needs closing here.)
void BeamSearch::add_finished(const std::vector<Continuation>& top) {
  const size_t width = static_cast<size_t>(config_.beam_width);
  if (!improvable_) return;
  for (size_t k = 0; k < std::min(width, top.size()); ++k) {
    const Continuation& c = top[k];
    if (!c.ends) continue;
    BeamHypothesis h;
    h.tokens = beams_[c.parent].tokens;
    h.tokens.push_back(c.token);
    h.sum_logprobs = c.sum;
    h.score = length_score(c.sum, num_generated_ + 1);
    finished_.push_back(std::move(h));
  }
  std::stable_sort(
      finished_.begin(), finished_.end(),
      [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score > b.score; });
  if (finished_.size() > width) finished_.resize(width);
}

// transformers' _check_early_stop_heuristic, after the step: can the best
// running beam still beat the worst finished hypothesis?
void BeamSearch::update_early_stop() {
  if (finished_.size() < static_cast<size_t>(config_.beam_width))
    return;  // an open slot: always improvable
  bool never_bound =
      config_.early_stopping == EarlyStopping::kNever && config_.length_penalty > 0.0f;
  int32_t best_length = never_bound ? config_.max_new_tokens : num_generated_;
  float best_running =
      beams_.empty() ? -std::numeric_limits<float>::infinity() : beams_[0].sum_logprobs;
  float best_possible = length_score(best_running, best_length);
  improvable_ = improvable_ && best_possible > finished_.back().score;
}

std::vector<BeamChoice> BeamSearch::step(std::span<const std::vector<BeamCandidate>> candidates) {
  assert(!done_ && candidates.size() == beams_.size());
  std::vector<Continuation> top = top_continuations(candidates);
  add_finished(top);
  std::vector<BeamChoice> choices;
  std::vector<Beam> next;
  for (const Continuation& c : top) {
    if (c.ends || static_cast<int32_t>(next.size()) == config_.beam_width) continue;
    choices.push_back({c.parent, c.token});
    Beam b{beams_[c.parent].tokens, c.sum};
    b.tokens.push_back(c.token);
    next.push_back(std::move(b));
  }
  beams_ = std::move(next);
  ++num_generated_;
  update_early_stop();
  bool closed = finished_.size() == static_cast<size_t>(config_.beam_width) &&
                config_.early_stopping == EarlyStopping::kTrue;
  done_ = !improvable_ || closed || beams_.empty();
  if (done_) {
    beams_.clear();
    choices.clear();
  }
  return choices;
}

std::vector<BeamHypothesis> BeamSearch::results() const {
  std::vector<BeamHypothesis> out = finished_;
  if (out.size() > static_cast<size_t>(config_.num_return)) out.resize(config_.num_return);
  return out;
}

}  // namespace pagoda
