#include "spec/spec_config.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

SpeculativeConfig parse_ok(const std::string& json) {
  auto r = parse_speculative_config(json);
  EXPECT_TRUE(r.ok()) << json << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : SpeculativeConfig{};
}

// The refusal of json: kInvalidArgument, "--speculative-config: <key>: ...".
void expect_refused(const std::string& json, const std::string& key) {
  auto r = parse_speculative_config(json);
  ASSERT_FALSE(r.ok()) << json;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message.rfind("--speculative-config: " + key + ":", 0), 0u)
      << json << " -> " << r.error().message;
}

TEST(SpecConfig, EmptyIsOff) {
  const SpeculativeConfig c = parse_ok("");
  EXPECT_FALSE(c.enabled());
  EXPECT_EQ(c.method, SpecMethod::kNone);
  EXPECT_STREQ(spec_method_name(c.method), "");
}

TEST(SpecConfig, NgramLookupDefaultsFollowVllm) {
  // Both unset: 5 and 5; one unset: the other's value.
  SpeculativeConfig c = parse_ok(R"({"method": "ngram", "num_speculative_tokens": 4})");
  EXPECT_EQ(c.method, SpecMethod::kNgram);
  EXPECT_STREQ(spec_method_name(c.method), "ngram");
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  c = parse_ok(R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})");
  EXPECT_EQ(c.prompt_lookup_min, 3);
  EXPECT_EQ(c.prompt_lookup_max, 3);
  c = parse_ok(R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 7})");
  EXPECT_EQ(c.prompt_lookup_min, 7);
  EXPECT_EQ(c.prompt_lookup_max, 7);
  c = parse_ok(
      R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 2, "prompt_lookup_max": 4, "disable_by_batch_size": 8})");
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 4);
  EXPECT_EQ(c.disable_by_batch_size, 8);
  EXPECT_DOUBLE_EQ(c.miss_cost_budget, 0.04);  // the default
  c = parse_ok(R"({"method": "ngram", "num_speculative_tokens": 2, "miss_cost_budget": 0.1})");
  EXPECT_DOUBLE_EQ(c.miss_cost_budget, 0.1);
  c = parse_ok(R"({"method": "ngram", "num_speculative_tokens": 2, "miss_cost_budget": 0})");
  EXPECT_DOUBLE_EQ(c.miss_cost_budget, 0.0);  // today's fixed cap
}

TEST(SpecConfig, VllmsNgramModelSpellingSelectsNgram) {
  for (
      const char* json :
      {R"({"model": "[ngram]", "num_speculative_tokens": 3, "prompt_lookup_max": 4})",
       R"({"model": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})",
       R"({"method": "ngram", "model": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})"}) {
    const SpeculativeConfig c = parse_ok(json);
    EXPECT_EQ(c.method, SpecMethod::kNgram) << json;
    EXPECT_EQ(c.model, "") << json;
    EXPECT_EQ(c.prompt_lookup_min, 4) << json;
    EXPECT_EQ(c.prompt_lookup_max, 4) << json;
  }
  expect_refused(R"({"method": "suffix", "model": "[ngram]"})", "model");
}

TEST(SpecConfig, SuffixDefaultsFollowVllm) {
  SpeculativeConfig c = parse_ok(R"({"method": "suffix"})");
  EXPECT_EQ(c.method, SpecMethod::kSuffix);
  EXPECT_STREQ(spec_method_name(c.method), "suffix");
  EXPECT_EQ(c.suffix_max_tree_depth, 24);
  EXPECT_EQ(c.suffix_max_cached_requests, 10000);
  EXPECT_DOUBLE_EQ(c.suffix_max_spec_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.suffix_min_token_prob, 0.1);
  EXPECT_EQ(c.num_speculative_tokens, 24);  // the tree depth
  EXPECT_EQ(c.disable_by_batch_size, 0);
  c = parse_ok(
      R"({"method": "suffix", "suffix_decoding_max_tree_depth": 12, "suffix_decoding_max_cached_requests": 0, "suffix_decoding_max_spec_factor": 2.5, "suffix_decoding_min_token_prob": 0.3})");
  EXPECT_EQ(c.suffix_max_tree_depth, 12);
  EXPECT_EQ(c.num_speculative_tokens, 12);
  EXPECT_EQ(c.suffix_max_cached_requests, 0);
  EXPECT_DOUBLE_EQ(c.suffix_max_spec_factor, 2.5);
  EXPECT_DOUBLE_EQ(c.suffix_min_token_prob, 0.3);
  c = parse_ok(R"({"method": "suffix", "num_speculative_tokens": 6})");
  EXPECT_EQ(c.num_speculative_tokens, 6);
  // A tree deeper than the most tokens a step may draft caps the default.
  c = parse_ok(R"({"method": "suffix", "suffix_decoding_max_tree_depth": 100})");
  EXPECT_EQ(c.num_speculative_tokens, 64);
}

TEST(SpecConfig, DraftModel) {
  SpeculativeConfig c = parse_ok(
      R"({"method": "draft_model", "model": "/m/draft", "revision": "main", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1})");
  EXPECT_EQ(c.method, SpecMethod::kDraftModel);
  EXPECT_STREQ(spec_method_name(c.method), "draft_model");
  EXPECT_EQ(c.model, "/m/draft");
  EXPECT_EQ(c.revision, "main");
  EXPECT_EQ(c.num_speculative_tokens, 3);
  // vLLM infers draft_model when only a model is given.
  c = parse_ok(R"({"model": "/m/draft", "num_speculative_tokens": 2})");
  EXPECT_EQ(c.method, SpecMethod::kDraftModel);
}

TEST(SpecConfig, Eagle) {
  const SpeculativeConfig c = parse_ok(
      R"({"method": "eagle", "model": "/m/head", "revision": "r", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1})");
  EXPECT_EQ(c.method, SpecMethod::kEagle);
  EXPECT_STREQ(spec_method_name(c.method), "eagle");
  EXPECT_TRUE(c.has_model());
  EXPECT_EQ(c.model, "/m/head");
  EXPECT_EQ(c.revision, "r");
  EXPECT_EQ(c.num_speculative_tokens, 3);
  // eagle3 names its head the same way (the engine checks it).
  const SpeculativeConfig c3 =
      parse_ok(R"({"method": "eagle3", "model": "/m/head3", "num_speculative_tokens": 2})");
  EXPECT_EQ(c3.method, SpecMethod::kEagle3);
  EXPECT_STREQ(spec_method_name(c3.method), "eagle3");
  EXPECT_TRUE(c3.has_model());
  EXPECT_EQ(c3.model, "/m/head3");
}

TEST(SpecConfig, RefusalsNameTheirKey) {
  auto r = parse_speculative_config("[1]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(parse_speculative_config("{oops").ok());

  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 2, "typo": 1})", "typo");
  expect_refused(R"({"num_speculative_tokens": 2})", "method");
  expect_refused(R"({"method": 3, "num_speculative_tokens": 2})", "method");
  expect_refused(R"({"method": "magic", "num_speculative_tokens": 2})", "method");
  expect_refused(R"({"method": "eagle3", "num_speculative_tokens": 2})", "model");
  expect_refused(R"({"method": "medusa", "model": "x", "num_speculative_tokens": 2})", "method");
  expect_refused(R"({"method": "eagle", "num_speculative_tokens": 2})", "model");
  expect_refused(R"({"method": "eagle", "model": "x"})", "num_speculative_tokens");
  expect_refused(R"({"method": "draft_model", "num_speculative_tokens": 2})", "model");
  expect_refused(R"({"method": "ngram", "model": "x", "num_speculative_tokens": 2})", "model");
  expect_refused(R"({"method": "ngram", "revision": "r", "num_speculative_tokens": 2})",
                 "revision");
  expect_refused(R"({"method": "ngram", "model": 5, "num_speculative_tokens": 2})", "model");

  expect_refused(R"({"method": "ngram"})", "num_speculative_tokens");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 0})", "num_speculative_tokens");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 65})", "num_speculative_tokens");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 2.5})", "num_speculative_tokens");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": "2"})", "num_speculative_tokens");

  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 0})",
                 "prompt_lookup_min");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 0})",
                 "prompt_lookup_max");
  expect_refused(
      R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 3})",
      "prompt_lookup_min");
  expect_refused(R"({"method": "suffix", "prompt_lookup_max": 3})", "prompt_lookup_max");
  expect_refused(R"({"method": "suffix", "prompt_lookup_min": 3})", "prompt_lookup_min");

  expect_refused(R"({"method": "suffix", "suffix_decoding_max_tree_depth": 0})",
                 "suffix_decoding_max_tree_depth");
  expect_refused(R"({"method": "suffix", "suffix_decoding_max_cached_requests": -1})",
                 "suffix_decoding_max_cached_requests");
  expect_refused(R"({"method": "suffix", "suffix_decoding_max_spec_factor": -0.5})",
                 "suffix_decoding_max_spec_factor");
  expect_refused(R"({"method": "suffix", "suffix_decoding_max_spec_factor": "1"})",
                 "suffix_decoding_max_spec_factor");
  expect_refused(R"({"method": "suffix", "suffix_decoding_min_token_prob": 1.5})",
                 "suffix_decoding_min_token_prob");
  expect_refused(
      R"({"method": "ngram", "num_speculative_tokens": 2, "suffix_decoding_max_tree_depth": 4})",
      "suffix_decoding_max_tree_depth");
  expect_refused(
      R"({"method": "ngram", "num_speculative_tokens": 2, "suffix_decoding_min_token_prob": 0.2})",
      "suffix_decoding_min_token_prob");

  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 2, "disable_by_batch_size": -1})",
                 "disable_by_batch_size");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 2, "miss_cost_budget": -0.1})",
                 "miss_cost_budget");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 2, "miss_cost_budget": "x"})",
                 "miss_cost_budget");
  expect_refused(
      R"({"method": "draft_model", "model": "x", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 2})",
      "draft_tensor_parallel_size");
  expect_refused(
      R"({"method": "ngram", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1})",
      "draft_tensor_parallel_size");
}

}  // namespace
}  // namespace pagoda
