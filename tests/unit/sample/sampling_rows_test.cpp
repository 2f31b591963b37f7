// Sampling rows: parameters, penalty lists, bias with the min_tokens ban,
// seeds and steps, offsets.
#include "sample/sampling_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;
const Ids kEos = {2};

TEST(SamplingRows, CopiesParametersSeedAndStep) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = -1;
  p.top_p = 0.9f;
  p.min_p = 0.1f;
  p.logprobs = 5;
  SamplingBatch b;
  Ids prompt = {5, 6}, out = {7, 8, 9};
  append_sampling_row(b, p, kEos, {prompt, out, 1234});
  ASSERT_EQ(b.rows.size(), 1u);
  const SamplingRow& r = b.rows[0];
  EXPECT_EQ(r.temperature, 0.7f);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.min_p, 0.1f);
  EXPECT_EQ(r.seed, 1234u);
  EXPECT_EQ(r.step, 3u);  // tokens already generated: reproducible after preemption
  EXPECT_EQ(r.num_top_logprobs, 5);
  EXPECT_EQ(r.target_token, -1);
  EXPECT_EQ(b.max_top_logprobs, 5);
  // No penalties and no bias: empty ranges.
  EXPECT_EQ(b.penalty_offsets, (Ids{0, 0}));
  EXPECT_EQ(b.bias_offsets, (Ids{0, 0}));
}

TEST(SamplingRows, PenaltyTokensCountOutputsAndFlagPromptForRepetitionOnly) {
  Ids prompt = {5, 3, 5}, out = {3, 9, 3, 4};
  SamplingParams rep;
  rep.repetition_penalty = 1.3f;
  SamplingParams freq;
  freq.frequency_penalty = 0.5f;
  SamplingBatch b;
  append_sampling_row(b, rep, kEos, {prompt, out, 0});
  append_sampling_row(b, freq, kEos, {prompt, out, 0});
  append_sampling_row(b, SamplingParams{}, kEos, {prompt, out, 0});
  EXPECT_EQ(b.penalty_offsets, (Ids{0, 4, 7, 7}));
  // Row 0: ids 3 4 5 9 (prompt 5 included); row 1: output ids 3 4 9.
  EXPECT_EQ(b.penalty_tokens, (Ids{3, 4, 5, 9, 3, 4, 9}));
  EXPECT_EQ(b.penalty_output_counts, (Ids{2, 1, 0, 1, 2, 1, 1}));
  EXPECT_EQ(b.penalty_in_prompt, (std::vector<uint8_t>{1, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(b.rows[0].repetition_penalty, 1.3f);
  EXPECT_EQ(b.rows[1].frequency_penalty, 0.5f);
}

TEST(SamplingRows, BiasAndStopTokenBanUntilMinTokens) {
  SamplingParams p;
  p.logit_bias = {{9, 5.0f}, {2, 1.0f}};
  p.stop_token_ids = {7};
  p.min_tokens = 2;
  SamplingBatch b;
  Ids prompt = {1}, one = {4}, two = {4, 4};
  append_sampling_row(b, p, kEos, {prompt, one, 0});  // 1 < 2: ban EOS 2 and 7
  append_sampling_row(b, p, kEos, {prompt, two, 0});  // reached: plain bias
  p.ignore_eos = true;
  append_sampling_row(b, p, kEos, {prompt, one, 0});  // EOS not banned, 7 still is
  EXPECT_EQ(b.bias_offsets, (Ids{0, 3, 5, 8}));
  EXPECT_EQ(b.bias_tokens, (Ids{2, 7, 9, 2, 9, 2, 7, 9}));
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(b.bias_values, (std::vector<float>{-inf, -inf, 5.0f, 1.0f, 5.0f, 1.0f, -inf, 5.0f}));
}

TEST(SamplingRows, UnsetFieldsUseBuiltInDefaults) {
  SamplingBatch b;
  Ids none;
  append_sampling_row(b, SamplingParams{}, kEos, {none, none, 0});
  const SamplingRow& r = b.rows[0];
  EXPECT_EQ(r.temperature, kDefaultTemperature);
  EXPECT_EQ(r.top_p, kDefaultTopP);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_EQ(r.min_p, 0.0f);
  EXPECT_EQ(r.repetition_penalty, 1.0f);
  EXPECT_EQ(r.num_top_logprobs, 0);
}

TEST(SamplingRows, PromptLogprobAndBeamRows) {
  SamplingParams p;
  p.prompt_logprobs = 3;
  SamplingBatch b;
  append_prompt_logprob_row(b, p, 42);
  append_beam_row(b, 8);
  EXPECT_EQ(b.rows[0].target_token, 42);
  EXPECT_EQ(b.rows[0].num_top_logprobs, 3);
  EXPECT_LT(b.rows[0].temperature, 1e-5f);
  EXPECT_EQ(b.rows[1].num_top_logprobs, 8);
  EXPECT_LT(b.rows[1].temperature, 1e-5f);
  EXPECT_EQ(b.max_top_logprobs, 8);
  EXPECT_EQ(b.penalty_offsets, (Ids{0, 0, 0}));
}

TEST(SamplingRows, SampleSeedsDifferAndReproduce) {
  std::set<uint64_t> seen;
  for (int32_t i = 0; i < 64; ++i) seen.insert(sample_seed(7, i));
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_EQ(sample_seed(7, 3), sample_seed(7, 3));
  EXPECT_NE(sample_seed(7, 0), sample_seed(8, 0));
}

}  // namespace
}  // namespace pagoda
