// Plain data for the backend's sample() op: per-row logits processing,
// sampling and logprobs. One row per logits row.
//
// Exact semantics (the CPU backend is the reference; CUDA must match):
//  Let x = logits row (f32, length V).
//  raw logprobs  lp_raw = log_softmax(x)  (before any processing). All
//                reported logprobs and ranks use lp_raw; rank(t) = 1 + number
//                of tokens u with lp_raw[u] > lp_raw[t].
//  0. mask:      for a masked row, x[t] = -inf for every token t its mask
//                does not allow (SamplingBatch::allowed_words). A mask allows
//                at least one token (validate_step refuses a batch where one
//                allows none); should bias and penalties leave every token at
//                -inf, the sample is the lowest id of the row's maximum, i.e.
//                token 0 (the builders avoid that: sample/sampling_rows.h).
//  1. bias:      x[t] += bias for each (t, bias) of the row (-inf bans t).
//  2. penalties: for each listed token t of the row with output count c and
//                prompt flag:
//                  if repetition_penalty != 1 and (c > 0 or in_prompt):
//                    x[t] = x[t] > 0 ? x[t] / rep : x[t] * rep
//                  x[t] -= frequency_penalty * c + presence_penalty * (c > 0)
//  3. greedy:    if temperature < 1e-5: token = argmax x (lowest id on ties).
//  4. otherwise  x /= temperature; p = softmax(x);
//     min_p:     if min_p > 0: drop t with p[t] < min_p * max(p);
//     top_k:     if 0 < top_k < V: keep the top_k largest x (ties at the
//                boundary broken towards the lower id);
//     top_p:     if top_p < 1: renormalise the kept p, sort descending (lower
//                id first on ties), keep the shortest prefix whose sum >= top_p
//                (always at least one token);
//     draw:      token = argmax over kept t of p[t] / e_t with
//                e_t = -log(philox_uniform(seed, step, t)) (core/philox.h):
//                an exponential race, equivalent to sampling from the kept,
//                renormalised p.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda {

struct SamplingRow {
  float temperature = 1.0f;
  int32_t top_k = 0;      // <= 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  uint64_t step = 0;      // index of the token being drawn within its sequence's output
  int32_t num_top_logprobs = 0;  // report this many top tokens (<= SamplingBatch::max_top_logprobs)
  int32_t target_token = -1;     // >= 0: report lp_raw and rank of this token (prompt logprobs)
};

struct SamplingBatch {
  std::vector<SamplingRow> rows;
  // Penalty tokens of row r: indices [penalty_offsets[r], penalty_offsets[r+1]).
  // Empty penalty_offsets means no row has penalty tokens.
  std::vector<int32_t> penalty_offsets;
  std::vector<int32_t> penalty_tokens;
  std::vector<int32_t> penalty_output_counts;  // times the token occurs in the output so far
  std::vector<uint8_t> penalty_in_prompt;      // 1 if the token occurs in the prompt
  // Logit bias of row r: indices [bias_offsets[r], bias_offsets[r+1]); empty = none.
  std::vector<int32_t> bias_offsets;
  std::vector<int32_t> bias_tokens;
  std::vector<float> bias_values;
  // Allowed-token masks (step 0), packed: W = mask_words = ceil(V / 32) words
  // per mask, bit t % 32 of word t / 32 set = token t may be sampled, bits at
  // V and beyond clear. Row r's mask is allowed_words[mask_index[r] * W, +W);
  // mask_index[r] = -1, or mask_index empty: unmasked. Rows may share a mask.
  // allowed_token_ids fills them from a mask built once per request, and
  // structured output per step (its constraint's next-token set, intersected
  // with allowed_token_ids). An unmasked batch carries no words and costs the
  // samplers nothing.
  std::vector<int32_t> mask_index;      // [R] or empty
  std::vector<uint32_t> allowed_words;  // [num_masks, W]
  int32_t mask_words = 0;               // W; 0 when no row is masked
  // [num_masks] a hash of each mask's words, by which the row builders
  // (sample/sampling_rows.h) store equal masks once; the samplers ignore it.
  std::vector<uint64_t> mask_hashes;
  int32_t max_top_logprobs = 0;  // K: width of SampleOutput::top_* rows

  // No rows; the vectors keep their capacity (a batch reused step to step).
  void clear() {
    rows.clear();
    penalty_offsets.clear();
    penalty_tokens.clear();
    penalty_output_counts.clear();
    penalty_in_prompt.clear();
    bias_offsets.clear();
    bias_tokens.clear();
    bias_values.clear();
    mask_index.clear();
    allowed_words.clear();
    mask_words = 0;
    mask_hashes.clear();
    max_top_logprobs = 0;
  }
};

struct SampleOutput {
  std::vector<int32_t> token_ids;      // [R] sampled token
  std::vector<float> logprobs;         // [R] lp_raw of the sampled token
  std::vector<int32_t> ranks;          // [R] rank of the sampled token
  std::vector<int32_t> top_ids;        // [R, K] top tokens by lp_raw, descending (lower id first on ties)
  std::vector<float> top_logprobs;     // [R, K]
  std::vector<float> target_logprobs;  // [R] lp_raw of target_token (NaN when none)
  std::vector<int32_t> target_ranks;   // [R] rank of target_token (0 when none)
};

// Whether mask `words` (W words, as SamplingBatch::allowed_words) allows token t.
inline bool mask_allows(const uint32_t* words, int64_t t) {
  return ((words[t >> 5] >> (t & 31)) & 1u) != 0;
}

}  // namespace pagoda
