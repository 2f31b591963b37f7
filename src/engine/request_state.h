// Engine-side state of one live request: what the scheduler does not know
// (sampling parameters, the output sink, per-sample detokenizers, stop
// checkers, penalty counts and structured-output constraint states, timing,
// prompt logprobs, beam search). Owned by the engine thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/beam_request.h"
#include "engine/engine_api.h"
#include "engine/prompt_logprobs.h"
#include "sample/penalty_counts.h"
#include "sample/sampling_rows.h"
#include "sample/stop_checker.h"
#include "sched/request.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One sample (index) of a request: a live sequence of the scheduler.
struct SampleState {
  int index = 0;  // output index in [0, num_seqs)
  IncrementalDetokenizer detok;
  StopChecker stop;
  // Penalty counts of the prompt and the tokens sampled so far (empty when
  // the request has no penalties); see count_token and recount.
  PenaltyCounts penalties;
  // Structured output: the constraint's state after the tokens sampled so
  // far (null: unconstrained). It belongs to the sample, not to the KV: a
  // preempted sample keeps its tokens and so its state.
  std::unique_ptr<TokenConstraint> constraint;
  double cumulative_logprob = 0.0;
  // Speculative decoding's back-off (LlmEngine::note_drafts): the sample is
  // drafted again from engine step spec_next_step on; spec_backoff is the
  // wait after its last step without an accepted draft (0: none).
  int64_t spec_next_step = 0;
  int32_t spec_backoff = 0;
  // Whether a draft of this sample was ever accepted (until then its waits
  // may grow to SpecBackoff::kMaxCap, whatever the measured cost).
  bool spec_ever_accepted = false;
  Clock::time_point last_token_time{};
  // With best_of > n, events are held until the request ends.
  std::vector<RequestOutput> held;
  bool finished = false;

  SampleState(int idx, const Tokenizer& tok, const SamplingParams& p, std::span<const int32_t> eos,
              int32_t max_tokens, std::span<const int32_t> prompt)
      : index(idx), detok(tok, p.skip_special_tokens, prompt), stop(p, eos, max_tokens) {
    recount(p, prompt, {});
  }

  // Appends a sampled token to the penalty counts.
  void count_token(const SamplingParams& p, int32_t token) {
    if (uses_penalties(p)) penalties.add(token);
  }
  // Recounts the penalties from the sequence's prompt and output tokens.
  void recount(const SamplingParams& p, std::span<const int32_t> prompt,
               std::span<const int32_t> outputs) {
    if (uses_penalties(p)) penalties.rebuild(prompt, outputs, penalises_prompt(p));
  }
};

struct RequestState {
  std::string external_id;
  RequestId id = 0;
  SamplingParams params;
  // params.allowed_token_ids packed over the model's vocabulary
  // (sample/token_mask.h), built once; empty: every token allowed.
  std::vector<uint32_t> allowed_mask;
  // Structured output (GenerateRequest::constraint); null: unconstrained.
  // Each sample holds its own state of it (SampleState::constraint).
  std::shared_ptr<const CompiledConstraint> constraint;
  OutputSink sink;
  std::vector<int32_t> prompt;
  uint64_t seed = 0;
  int priority = 0;
  int32_t max_tokens = 0;  // resolved output cap per sample
  int32_t num_seqs = 1;    // scheduler group width
  // Its samples get drafts (speculative decoding on, the request did not opt
  // out, no beam search). A constrained sample's drafts are cut to what its
  // constraint accepts (engine/constrained_draft.h).
  bool speculates = false;
  bool branched = false;             // the group has been forked into num_seqs samples
  std::vector<bool> index_reported;  // [params.n]: the final event of index k was sent
  int64_t num_cached_prompt_tokens = 0;

  // Timestamps for the metrics (EngineMetrics' request phases).
  Clock::time_point arrival{};
  std::optional<Clock::time_point> first_scheduled;
  std::optional<Clock::time_point> first_token;
  Clock::time_point last_token{};     // set with first_token, then at every token
  int64_t num_generation_tokens = 0;  // over all samples (beam search: the beams' tokens)
  int64_t max_sample_tokens = 0;      // the longest sample's (beam search: the steps)

  std::map<SeqId, std::unique_ptr<SampleState>> samples;  // live sequences
  int num_finished_samples = 0;
  std::vector<std::unique_ptr<SampleState>> done_samples;  // finished (best_of / beam bookkeeping)

  PromptLogprobs prompt_logprobs;
  std::unique_ptr<BeamRequest> beam;  // beam search requests only
};

}  // namespace pagoda
