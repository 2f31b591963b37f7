// SamplingParams: validation messages name the field, value and range;
// generation_config defaults fill only unset fields, and those out of range
// are dropped.
#include "sample/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "sample/sampling_fields.h"

namespace pagoda {
namespace {

std::string error_of(const std::function<void(SamplingParams&)>& edit, int32_t vocab = 100) {
  SamplingParams p;
  edit(p);
  Status st = p.validate(vocab);
  return st.ok() ? "" : st.error().message;
}

TEST(SamplingParams, DefaultsAreValid) {
  EXPECT_TRUE(SamplingParams{}.validate(100).ok());
  SamplingParams p;
  EXPECT_EQ(p.effective_temperature(), 1.0f);
  EXPECT_FALSE(p.is_greedy());
  EXPECT_EQ(p.num_seqs(), 1);
}

TEST(SamplingParams, ValidationNamesFieldValueAndRange) {
  struct Case {
    std::function<void(SamplingParams&)> edit;
    std::string want;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.n = 0; }, "'n' = 0 is out of range: must be in [1, 128]"},
      {[](SamplingParams& p) {
         p.n = 3;
         p.best_of = 2;
       },
       "'best_of' = 2 is out of range: must be in [3, 128]"},
      {[](SamplingParams& p) {
         p.best_of = 2;
         p.temperature = 0.0f;
       },
       "'best_of' = 2"},
      {[](SamplingParams& p) { p.temperature = -0.5f; },
       "'temperature' = -0.5 is out of range: must be a finite number >= 0"},
      {[](SamplingParams& p) { p.temperature = NAN; }, "'temperature' = nan"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "'top_p' = 0 is out of range: must be in (0, 1]"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "'top_p' = 1.5"},
      {[](SamplingParams& p) { p.top_k = -2; },
       "'top_k' = -2 is out of range: must be in [-1, 2147483647]"},
      {[](SamplingParams& p) { p.min_p = 1.25f; },
       "'min_p' = 1.25 is out of range: must be in [0, 1]"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; },
       "'repetition_penalty' = 0 is out of range: must be in (0, 100]"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; },
       "'presence_penalty' = 2.5 is out of range: must be in [-2, 2]"},
      {[](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "'frequency_penalty' = -3"},
      {[](SamplingParams& p) { p.logit_bias[100] = 1.0f; },
       "'logit_bias' = 100 is out of range: must be a token id in [0, 100)"},
      {[](SamplingParams& p) { p.logit_bias[5] = 101.0f; },
       "'logit_bias' = 101 is out of range: must be a bias in [-100, 100]"},
      {[](SamplingParams& p) {
         p.stop = {"ok", ""};
       },
       "'stop' = \"\" is out of range: must be non-empty strings"},
      {[](SamplingParams& p) {
         p.stop_token_ids = {3, -1};
       },
       "'stop_token_ids' = -1"},
      {[](SamplingParams& p) { p.max_tokens = 0; },
       "'max_tokens' = 0 is out of range: must be in [1, 2147483647]"},
      {[](SamplingParams& p) {
         p.max_tokens = 4;
         p.min_tokens = 5;
       },
       "'min_tokens' = 5 is out of range: must be in [0, 4]"},
      {[](SamplingParams& p) { p.logprobs = 21; },
       "'logprobs' = 21 is out of range: must be in [0, 20]"},
      {[](SamplingParams& p) { p.prompt_logprobs = -1; }, "'prompt_logprobs' = -1"},
      {[](SamplingParams& p) {
         p.use_beam_search = true;
         p.beam_width = 17;
       },
       "'beam_width' = 17 is out of range: must be in [1, 16]"},
      {[](SamplingParams& p) {
         p.use_beam_search = true;
         p.beam_width = 2;
         p.n = 3;
       },
       "'n' = 3 is out of range: must be in [1, 2]"},
      {[](SamplingParams& p) {
         p.use_beam_search = true;
         p.best_of = 1;
       },
       "'best_of' = 1 is out of range: must be unset with beam search"},
      {[](SamplingParams& p) {
         p.use_beam_search = true;
         p.length_penalty = INFINITY;
       },
       "'length_penalty' = inf"},
      {[](SamplingParams& p) { p.allowed_token_ids = {0, 100}; },
       "'allowed_token_ids' = 100 is out of range: must be a token id in [0, 100)"},
      {[](SamplingParams& p) { p.bad_words_token_ids = {{3, -2}}; }, "'bad_words' = -2"},
      {[](SamplingParams& p) { p.bad_words_token_ids = {{3}, {}}; },
       "'bad_words' = [] is out of range: must be non-empty token sequences"},
      {[](SamplingParams& p) {
         p.use_beam_search = true;
         p.allowed_token_ids = {4};
       },
       "'allowed_token_ids' cannot be used with beam search"},
      {[](SamplingParams& p) {
         p.use_beam_search = true;
         p.bad_words_token_ids = {{4}};
       },
       "'bad_words' cannot be used with beam search"},
  };
  for (const Case& c : cases) {
    std::string msg = error_of(c.edit);
    EXPECT_NE(msg.find(c.want), std::string::npos) << "got: " << msg << "\nwant: " << c.want;
  }
  EXPECT_NE(error_of([](SamplingParams&) {}, 0).find("'vocab_size' = 0"), std::string::npos);
}

TEST(SamplingParams, EdgeValuesAreAccepted) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.top_k = -1;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logit_bias = {{0, -100.0f}, {99, 100.0f}};
  p.stop_token_ids = {0, 99};
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.logprobs = 20;
  p.prompt_logprobs = 0;
  EXPECT_TRUE(p.validate(100).ok());
  EXPECT_TRUE(p.is_greedy());
  SamplingParams beam;
  beam.use_beam_search = true;
  beam.beam_width = 4;
  beam.n = 4;
  beam.length_penalty = -1.5f;
  EXPECT_TRUE(beam.validate(100).ok());
  EXPECT_EQ(beam.num_seqs(), 4);
  SamplingParams best;
  best.n = 2;
  best.best_of = 5;
  EXPECT_EQ(best.num_seqs(), 5);
}

TEST(SamplingParams, GenerationDefaultsFillOnlyUnsetFields) {
  GenerationDefaults d;
  d.temperature = 0.6;
  d.top_p = 0.9;
  d.top_k = 50;
  d.min_p = 0.05;
  d.repetition_penalty = 1.1;
  d.max_new_tokens = 256;
  SamplingParams p;
  p.temperature = 0.2f;  // the request's value wins
  p.apply_defaults(d);
  EXPECT_EQ(p.temperature, 0.2f);
  EXPECT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 50);
  EXPECT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.max_tokens, 256);
  // Nothing in generation_config: built-in defaults stay in effect.
  SamplingParams q;
  q.apply_defaults(GenerationDefaults{});
  EXPECT_FALSE(q.temperature.has_value());
  EXPECT_EQ(q.effective_temperature(), kDefaultTemperature);
  EXPECT_FALSE(q.max_tokens.has_value());
}

TEST(SamplingParams, OutOfRangeGenerationDefaultsAreDroppedNotImposed) {
  GenerationDefaults d;
  d.temperature = 3.0;          // above the request range [0, 2]
  d.top_p = 0.9;                // valid: kept
  d.max_new_tokens = 0;         // max_tokens must be >= 1
  d.repetition_penalty = std::nan("");
  const std::vector<SamplingFieldError> dropped = drop_out_of_range_defaults(d);
  ASSERT_EQ(dropped.size(), 3u);
  EXPECT_EQ(dropped[0].field, "temperature");
  EXPECT_NE(dropped[0].message.find("'temperature' = 3 is out of range"), std::string::npos)
      << dropped[0].message;
  EXPECT_EQ(dropped[1].field, "repetition_penalty");
  EXPECT_EQ(dropped[2].field, "max_tokens");
  EXPECT_FALSE(d.temperature.has_value());
  EXPECT_FALSE(d.repetition_penalty.has_value());
  EXPECT_FALSE(d.max_new_tokens.has_value());
  EXPECT_EQ(d.top_p, 0.9);
  // A request that leaves the fields unset is valid with what is left.
  SamplingParams p;
  p.apply_defaults(d);
  EXPECT_TRUE(p.validate(100).ok());
  EXPECT_EQ(p.effective_temperature(), kDefaultTemperature);
  EXPECT_EQ(p.top_p, 0.9f);
  // Nothing to drop: nothing changes.
  GenerationDefaults ok;
  ok.temperature = 0.7;
  EXPECT_TRUE(drop_out_of_range_defaults(ok).empty());
  EXPECT_EQ(ok.temperature, 0.7);
}

}  // namespace
}  // namespace pagoda
