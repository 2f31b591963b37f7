// Sampling rows: parameters, penalty lists, bias with the min_tokens ban and
// bad words, allowed-token masks, seeds and steps, offsets.
#include "sample/sampling_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "sample/token_mask.h"

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

TEST(SamplingRows, BadWordsBanTheirLastTokenAfterTheirPrefix) {
  SamplingParams p;
  p.bad_words_token_ids = {{5}, {7, 8}, {1, 2, 3}};
  p.logit_bias = {{8, 2.0f}};
  SamplingBatch b;
  Ids prompt = {7, 1, 2}, none, after7 = {4, 7}, after12 = {1, 2}, after712 = {7, 1, 2};
  append_sampling_row(b, p, kEos, {prompt, none, 0});      // the prompt never matches: only 5
  append_sampling_row(b, p, kEos, {prompt, after7, 0});    // 5 and 8 (over its +2 bias)
  append_sampling_row(b, p, kEos, {prompt, after12, 0});   // 5 and 3
  append_sampling_row(b, p, kEos, {prompt, after712, 0});  // 5 and 3 again
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(b.bias_offsets, (Ids{0, 2, 4, 7, 10}));
  EXPECT_EQ(b.bias_tokens, (Ids{5, 8, 5, 8, 3, 5, 8, 3, 5, 8}));
  EXPECT_EQ(b.bias_values,
            (std::vector<float>{-inf, 2.0f, -inf, -inf, -inf, -inf, 2.0f, -inf, -inf, 2.0f}));
}

TEST(SamplingRows, AllowedMaskRowsShareEqualMasksAndPadUnmaskedRows) {
  SamplingParams plain, allowed;
  allowed.allowed_token_ids = {3, 33, 69};
  const std::vector<uint32_t> mask = pack_token_mask(allowed.allowed_token_ids, 70);
  ASSERT_EQ(mask, (std::vector<uint32_t>{1u << 3, 1u << 1, 1u << 5}));
  const std::vector<uint32_t> other = pack_token_mask(Ids{0}, 70);
  SamplingBatch b;
  Ids none;
  append_sampling_row(b, allowed, kEos, {none, none, 0, nullptr, other});  // a masked first row
  EXPECT_EQ(b.mask_index, (Ids{0}));
  b.clear();
  append_sampling_row(b, plain, kEos, {none, none, 0});
  EXPECT_TRUE(b.mask_index.empty());  // no masked row yet: no mask arrays at all
  append_sampling_row(b, allowed, kEos, {none, none, 0, nullptr, mask});
  append_sampling_row(b, allowed, kEos, {none, none, 1, nullptr, mask});  // n samples: one mask
  append_prompt_logprob_row(b, plain, 4);
  append_sampling_row(b, allowed, kEos, {none, none, 0, nullptr, other});
  EXPECT_EQ(b.mask_index, (Ids{-1, 0, 0, -1, 1}));
  EXPECT_EQ(b.mask_words, 3);
  std::vector<uint32_t> want = mask;
  want.insert(want.end(), other.begin(), other.end());
  EXPECT_EQ(b.allowed_words, want);
  b.clear();
  EXPECT_TRUE(b.mask_index.empty() && b.allowed_words.empty() && b.mask_words == 0);
}

// Structured output gives rows per-step masks in any order: equal ones are
// stored once wherever they occur in the batch (by hash, then compared).
TEST(SamplingRows, EqualMasksAnywhereInTheBatchShareOne) {
  SamplingParams p;
  Ids none;
  const std::vector<uint32_t> a = pack_token_mask(Ids{1, 40}, 70);
  const std::vector<uint32_t> b_mask = pack_token_mask(Ids{2}, 70);
  const std::vector<uint32_t> c = pack_token_mask(Ids{1, 41}, 70);
  SamplingBatch b;
  for (const auto* m : {&a, &b_mask, &a, &c, &b_mask, &a})
    append_sampling_row(b, p, kEos, {none, none, 0, nullptr, *m});
  EXPECT_EQ(b.mask_index, (Ids{0, 1, 0, 2, 1, 0}));
  std::vector<uint32_t> want = a;
  want.insert(want.end(), b_mask.begin(), b_mask.end());
  want.insert(want.end(), c.begin(), c.end());
  EXPECT_EQ(b.allowed_words, want);
  EXPECT_EQ(b.mask_hashes.size(), 3u);
  b.clear();
  EXPECT_TRUE(b.mask_hashes.empty());
}

TEST(SamplingRows, BansThatWouldEmptyTheMaskAreLiftedForTheStep) {
  SamplingParams p;
  p.allowed_token_ids = {2, 6};
  p.min_tokens = 1;
  p.bad_words_token_ids = {{6}};
  const std::vector<uint32_t> mask = pack_token_mask(p.allowed_token_ids, 10);
  SamplingBatch b;
  Ids none, one = {6};
  // EOS 2 (min_tokens) and 6 (bad word) ban both allowed tokens: lifted.
  append_sampling_row(b, p, kEos, {none, none, 0, nullptr, mask});
  // min_tokens reached: only 6 is banned and 2 stays.
  append_sampling_row(b, p, kEos, {none, one, 0, nullptr, mask});
  // Unmasked, the same bans hold.
  append_sampling_row(b, p, kEos, {none, none, 0});
  EXPECT_EQ(b.bias_offsets, (Ids{0, 0, 1, 3}));
  EXPECT_EQ(b.bias_tokens, (Ids{6, 2, 6}));
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
