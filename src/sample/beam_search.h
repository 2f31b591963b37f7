// Host-side beam search with Hugging Face transformers' semantics (the
// vectorized _beam_search of transformers >= 4.50):
//  - each step keeps the top K = max(2, 1 + num_eos) * beam_width
//    continuations of all live beams by cumulative logprob;
//  - a continuation that ends (an EOS token, or max_new_tokens reached)
//    becomes a finished hypothesis only if it ranks among the top
//    beam_width of the K, scored sum_logprobs / length^length_penalty
//    (length counts generated tokens, the final one included); at most
//    beam_width hypotheses are kept, the best by score;
//  - the next live beams are the beam_width best continuations that did not
//    end;
//  - the search stops when early stopping says no running beam can improve
//    the finished set (see EarlyStopping), when every kept continuation
//    ended, or at max_new_tokens; results() are the num_return best
//    hypotheses.
// Logprobs are the raw log-softmax of the model (no penalties), summed in
// float like transformers does.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/sampling_params.h"

namespace pagoda {

struct BeamSearchConfig {
  int32_t beam_width = 1;
  int32_t num_return = 1;  // n <= beam_width
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::kFalse;
  int32_t max_new_tokens = 16;  // >= 1
  std::vector<int32_t> eos_token_ids;
};

struct BeamCandidate {
  int32_t token = 0;
  float logprob = 0.0f;  // raw log-softmax of the token under the beam's context
};

struct BeamChoice {
  int32_t parent = 0;  // index into the live beams before the step
  int32_t token = 0;
};

struct Beam {
  std::vector<int32_t> tokens;  // generated tokens
  float sum_logprobs = 0.0f;
};

struct BeamHypothesis {
  std::vector<int32_t> tokens;  // generated tokens, the final EOS included
  float sum_logprobs = 0.0f;
  float score = 0.0f;  // sum_logprobs / tokens.size()^length_penalty
};

class BeamSearch {
 public:
  explicit BeamSearch(const BeamSearchConfig& config);

  // Top tokens each live beam must report per step (the K above).
  int32_t num_candidates_per_beam() const { return num_keep_; }
  // Live beams; one empty beam before the first step.
  const std::vector<Beam>& beams() const { return beams_; }
  bool done() const { return done_; }

  // candidates[i]: the top num_candidates_per_beam() tokens of live beam i
  // (fewer when the vocabulary is smaller), any order. Returns the new live
  // beams as (parent, token), best first; empty once done().
  std::vector<BeamChoice> step(std::span<const std::vector<BeamCandidate>> candidates);

  // The num_return best finished hypotheses, best first.
  std::vector<BeamHypothesis> results() const;

 private:
  struct Continuation {
    int32_t parent = 0;
    int32_t token = 0;
    float sum = 0.0f;
    bool ends = false;
  };
  std::vector<Continuation> top_continuations(
      std::span<const std::vector<BeamCandidate>> candidates) const;
  void add_finished(const std::vector<Continuation>& top);
  void update_early_stop();
  float length_score(float sum, int32_t length) const;

  BeamSearchConfig config_;
  int32_t num_keep_;
  std::vector<Beam> beams_;
  std::vector<BeamHypothesis> finished_;  // at most beam_width, best first
  int32_t num_generated_ = 0;             // tokens in each live beam
  bool improvable_ = true;                // transformers' is_early_stop_heuristic_unsatisfied
  bool done_ = false;
};

}  // namespace pagoda
