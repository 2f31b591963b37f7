#include "sample/sampling_rows.h"

#include <algorithm>
#include <limits>
#include <map>

namespace pagoda {

namespace {

// Adds an empty-or-not row: offsets first get their leading 0.
void append_row(SamplingBatch& batch, const SamplingRow& row) {
  if (batch.penalty_offsets.empty()) batch.penalty_offsets.push_back(0);
  if (batch.bias_offsets.empty()) batch.bias_offsets.push_back(0);
  batch.rows.push_back(row);
  batch.penalty_offsets.push_back(static_cast<int32_t>(batch.penalty_tokens.size()));
  batch.bias_offsets.push_back(static_cast<int32_t>(batch.bias_tokens.size()));
  batch.max_top_logprobs = std::max(batch.max_top_logprobs, row.num_top_logprobs);
}

void add_penalty_tokens(SamplingBatch& batch, const SamplingParams& params, const SeqSamplingState& seq) {
  if (!uses_penalties(params)) return;
  PenaltyCounts recounted;
  const PenaltyCounts* counts = seq.penalty_counts;
  if (counts == nullptr) {
    recounted.rebuild(seq.prompt_tokens, seq.output_tokens, penalises_prompt(params));
    counts = &recounted;
  }
  batch.penalty_tokens.insert(batch.penalty_tokens.end(), counts->tokens().begin(), counts->tokens().end());
  batch.penalty_output_counts.insert(batch.penalty_output_counts.end(), counts->output_counts().begin(),
                                     counts->output_counts().end());
  batch.penalty_in_prompt.insert(batch.penalty_in_prompt.end(), counts->in_prompt().begin(),
                                 counts->in_prompt().end());
}

void add_bias(SamplingBatch& batch, const SamplingParams& params,
              std::span<const int32_t> eos_token_ids, const SeqSamplingState& seq) {
  std::map<int32_t, float> bias(params.logit_bias.begin(), params.logit_bias.end());
  if (static_cast<int64_t>(seq.output_tokens.size()) < params.min_tokens) {
    constexpr float kBan = -std::numeric_limits<float>::infinity();
    for (int32_t t : params.stop_token_ids) bias[t] = kBan;
    if (!params.ignore_eos) {
      for (int32_t t : eos_token_ids) bias[t] = kBan;
    }
  }
  for (const auto& [t, b] : bias) {
    batch.bias_tokens.push_back(t);
    batch.bias_values.push_back(b);
  }
}

}  // namespace

bool uses_penalties(const SamplingParams& params) {
  return penalises_prompt(params) || params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f;
}

bool penalises_prompt(const SamplingParams& params) {
  return params.repetition_penalty.value_or(kDefaultRepetitionPenalty) != 1.0f;
}

uint64_t sample_seed(uint64_t request_seed, int32_t index) {
  // splitmix64 of (seed, index): distinct, well-mixed seeds per sample.
  uint64_t z = request_seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(index) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void append_sampling_row(SamplingBatch& batch, const SamplingParams& params,
                         std::span<const int32_t> eos_token_ids, const SeqSamplingState& seq) {
  SamplingRow row;
  row.temperature = params.effective_temperature();
  row.top_k = std::max(0, params.top_k.value_or(kDefaultTopK));
  row.top_p = params.top_p.value_or(kDefaultTopP);
  row.min_p = params.min_p.value_or(kDefaultMinP);
  row.repetition_penalty = params.repetition_penalty.value_or(kDefaultRepetitionPenalty);
  row.presence_penalty = params.presence_penalty;
  row.frequency_penalty = params.frequency_penalty;
  row.seed = seq.seed;
  row.step = seq.output_tokens.size();
  row.num_top_logprobs = params.logprobs.value_or(0);
  add_penalty_tokens(batch, params, seq);
  add_bias(batch, params, eos_token_ids, seq);
  append_row(batch, row);
}

void append_prompt_logprob_row(SamplingBatch& batch, const SamplingParams& params, int32_t target) {
  SamplingRow row;
  row.temperature = 0.0f;
  row.num_top_logprobs = params.prompt_logprobs.value_or(0);
  row.target_token = target;
  append_row(batch, row);
}

void append_beam_row(SamplingBatch& batch, int32_t num_candidates) {
  SamplingRow row;
  row.temperature = 0.0f;
  row.num_top_logprobs = num_candidates;
  append_row(batch, row);
}

}  // namespace pagoda
