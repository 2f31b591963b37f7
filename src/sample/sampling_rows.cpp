#include "sample/sampling_rows.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <map>
#include <vector>

#include "sample/bad_words.h"
#include "sample/token_mask.h"

namespace pagoda {

namespace {

constexpr float kBan = -std::numeric_limits<float>::infinity();

// Adds an empty-or-not row: offsets first get their leading 0. mask: the
// row's index in allowed_words, -1 for none (mask_index stays empty until a
// row has one).
void append_row(SamplingBatch& batch, const SamplingRow& row, int32_t mask = -1) {
  if (batch.penalty_offsets.empty()) batch.penalty_offsets.push_back(0);
  if (batch.bias_offsets.empty()) batch.bias_offsets.push_back(0);
  if (mask >= 0 || !batch.mask_index.empty()) {
    batch.mask_index.resize(batch.rows.size(), -1);
    batch.mask_index.push_back(mask);
  }
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

// This step's -inf bans: the stop tokens under min_tokens, then bad words.
std::vector<int32_t> banned_tokens(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                                   const SeqSamplingState& seq) {
  std::vector<int32_t> banned;
  if (static_cast<int64_t>(seq.output_tokens.size()) < params.min_tokens) {
    banned.assign(params.stop_token_ids.begin(), params.stop_token_ids.end());
    if (!params.ignore_eos) banned.insert(banned.end(), eos_token_ids.begin(), eos_token_ids.end());
  }
  add_bad_word_bans(params.bad_words_token_ids, seq.output_tokens, banned);
  return banned;
}

// Whether `banned` covers every token `mask` allows.
bool bans_whole_mask(std::span<const uint32_t> mask, std::vector<int32_t> banned) {
  std::sort(banned.begin(), banned.end());
  banned.erase(std::unique(banned.begin(), banned.end()), banned.end());
  const int64_t v = static_cast<int64_t>(mask.size()) * 32;
  int64_t hits = 0;
  for (int32_t t : banned) hits += t >= 0 && t < v && mask_allows(mask.data(), t) ? 1 : 0;
  return hits == count_allowed(mask);
}

void add_bias(SamplingBatch& batch, const SamplingParams& params,
              std::span<const int32_t> eos_token_ids, const SeqSamplingState& seq) {
  std::map<int32_t, float> bias(params.logit_bias.begin(), params.logit_bias.end());
  const std::vector<int32_t> banned = banned_tokens(params, eos_token_ids, seq);
  if (!banned.empty() && (seq.allowed_mask.empty() || !bans_whole_mask(seq.allowed_mask, banned))) {
    for (int32_t t : banned) bias[t] = kBan;
  }
  for (const auto& [t, b] : bias) {
    batch.bias_tokens.push_back(t);
    batch.bias_values.push_back(b);
  }
}

// A hash of the mask's words (equal masks hash equal): four independent
// multiply-xor lanes, so that a 128k-token mask (4k words) hashes in about a
// microsecond instead of a serial chain's four.
uint64_t hash_mask(std::span<const uint32_t> mask) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t lane[4] = {1, 2, 3, 4};
  size_t i = 0;
  for (; i + 4 <= mask.size(); i += 4) {
    for (int k = 0; k < 4; ++k) lane[k] = (lane[k] ^ mask[i + static_cast<size_t>(k)]) * kMul;
  }
  for (; i < mask.size(); ++i) lane[0] = (lane[0] ^ mask[i]) * kMul;
  uint64_t h = mask.size();
  for (uint64_t l : lane) h = (h ^ (l >> 29) ^ l) * kMul;
  return h;
}

// The index of `mask` in batch.allowed_words: an equal mask's already in the
// batch (found by hash, then compared), else a new one. Rows with equal masks
// share one: the n first samples of a request, and the structured-output
// rows whose constraints are in the same state.
int32_t add_mask(SamplingBatch& batch, std::span<const uint32_t> mask) {
  const auto w = static_cast<int32_t>(mask.size());
  assert(batch.mask_words == 0 || batch.mask_words == w);
  assert(batch.mask_hashes.size() * mask.size() == batch.allowed_words.size());
  batch.mask_words = w;
  const uint64_t h = hash_mask(mask);
  for (size_t m = 0; m < batch.mask_hashes.size(); ++m) {
    const auto stored = batch.allowed_words.begin() + static_cast<std::ptrdiff_t>(m * mask.size());
    if (batch.mask_hashes[m] == h && std::equal(mask.begin(), mask.end(), stored)) return static_cast<int32_t>(m);
  }
  batch.allowed_words.insert(batch.allowed_words.end(), mask.begin(), mask.end());
  batch.mask_hashes.push_back(h);
  return static_cast<int32_t>(batch.mask_hashes.size() - 1);
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
  append_row(batch, row, seq.allowed_mask.empty() ? -1 : add_mask(batch, seq.allowed_mask));
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
