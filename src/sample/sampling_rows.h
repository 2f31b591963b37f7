// Builders from per-sequence state to the backend's SamplingBatch rows
// (batch/sampling_batch.h). All rows of a batch must be appended through
// these functions, which keep the penalty and bias offset arrays at
// rows.size() + 1 entries.
#pragma once

#include <cstdint>
#include <span>

#include "batch/sampling_batch.h"
#include "sample/penalty_counts.h"
#include "sample/sampling_params.h"

namespace pagoda {

// What a row needs to know about its sequence.
struct SeqSamplingState {
  std::span<const int32_t> prompt_tokens;
  std::span<const int32_t> output_tokens;  // generated so far; its size is the row's step
  uint64_t seed = 0;                       // the sequence's seed (see sample_seed)
  // The sequence's penalty counts of prompt_tokens + output_tokens, kept
  // incrementally with flag_prompt = penalises_prompt(params); null: counted
  // here from the two spans (O(prompt + output)).
  const PenaltyCounts* penalty_counts = nullptr;
  // The row's allowed-token mask (sample/token_mask.h, over the logits'
  // vocabulary); empty: unmasked. Must be params.allowed_token_ids packed
  // when that is set: the caller builds it once per request. Structured
  // output passes its constraint's mask for the step here, intersected with
  // allowed_token_ids (engine/constraint_masks.h).
  std::span<const uint32_t> allowed_mask = {};
};

// Whether rows of `params` list penalty tokens (any penalty is on).
bool uses_penalties(const SamplingParams& params);
// Whether they list the prompt's tokens too (repetition_penalty != 1).
bool penalises_prompt(const SamplingParams& params);

// The seed of sample `index` of a request whose seed is `request_seed`, so
// that the n samples of one seeded request differ yet reproduce.
uint64_t sample_seed(uint64_t request_seed, int32_t index);

// Appends the row that samples the next token of a sequence:
//  - temperature, top_k (-1 becomes 0: off), top_p, min_p, penalties from
//    params (unset fields take the kDefault* values);
//  - penalty tokens, ascending ids: every output token with its count and,
//    when repetition_penalty != 1, every prompt token flagged in_prompt
//    (presence and frequency penalties use output counts only);
//  - bias, ascending ids: logit_bias, -inf on the stop tokens
//    (stop_token_ids, EOS unless ignore_eos) while fewer than min_tokens
//    tokens exist, and -inf on the tokens bad words ban (sample/bad_words.h);
//  - the mask seq.allowed_mask, stored once per batch: a row whose mask
//    equals an earlier row's (anywhere in the batch) shares it. The mask
//    is the hard rule: should this step's -inf bans (min_tokens,
//    bad words) cover every token it allows, those bans are dropped for the
//    step, so a masked row always samples an allowed token;
//  - seed and step = output_tokens.size(), so a draw depends only on the
//    sequence, never on the batch or on preemption;
//  - num_top_logprobs = params.logprobs (0 when unset).
void append_sampling_row(SamplingBatch& batch, const SamplingParams& params,
                         std::span<const int32_t> eos_token_ids, const SeqSamplingState& seq);

// Appends a row that reports the logprob and rank of `target` (the next
// prompt token) and the prompt_logprobs top tokens; its sampled token is
// ignored (greedy, no processing, no mask: prompt logprobs are raw, as
// vLLM's).
void append_prompt_logprob_row(SamplingBatch& batch, const SamplingParams& params, int32_t target);

// Appends a beam-search row: greedy, no processing, no mask, reporting the
// num_candidates top tokens by raw logprob (BeamSearch::num_candidates_per_beam());
// SamplingParams::check refuses allowed_token_ids and bad_words with beam search.
void append_beam_row(SamplingBatch& batch, int32_t num_candidates);

}  // namespace pagoda
