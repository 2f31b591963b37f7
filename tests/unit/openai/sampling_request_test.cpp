// Request fields → SamplingParams: every field's type and range errors, the
// fields read straight into SamplingParams, and context fitting.
#include "openai/sampling_request.h"

#include <gtest/gtest.h>

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;

constexpr int64_t kVocab = 512;

std::optional<ApiError> read_error(const std::string& text) {
  json body = json::parse(text);
  FieldReader reader(body);
  read_sampling_request(reader, kVocab);
  return reader.error();
}

TEST(SamplingRequest, EveryFieldRejectsWrongTypesAndRanges) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"n": 0})", "n"},
      {R"({"n": 129})", "n"},
      {R"({"n": "2"})", "n"},
      {R"({"n": 1.5})", "n"},
      {R"({"best_of": 1, "n": 2})", "best_of"},
      {R"({"temperature": -0.1})", "temperature"},
      {R"({"temperature": 2.5})", "temperature"},
      {R"({"temperature": "hot"})", "temperature"},
      {R"({"top_p": 0})", "top_p"},
      {R"({"top_p": 1.01})", "top_p"},
      {R"({"top_p": true})", "top_p"},
      {R"({"top_k": -2})", "top_k"},
      {R"({"top_k": 1.5})", "top_k"},
      {R"({"min_p": 1.5})", "min_p"},
      {R"({"seed": "42"})", "seed"},
      {R"({"seed": 1.5})", "seed"},
      {R"({"presence_penalty": 2.1})", "presence_penalty"},
      {R"({"frequency_penalty": -2.1})", "frequency_penalty"},
      {R"({"repetition_penalty": 0})", "repetition_penalty"},
      {R"({"logit_bias": [1]})", "logit_bias"},
      {R"({"logit_bias": {"abc": 1}})", "logit_bias"},
      {R"({"logit_bias": {"512": 1}})", "logit_bias"},
      {R"({"logit_bias": {"-1": 1}})", "logit_bias"},
      {R"({"logit_bias": {"5": 101}})", "logit_bias"},
      {R"({"logit_bias": {"5": "x"}})", "logit_bias"},
      {R"({"stop": 5})", "stop"},
      {R"({"stop": ["a", 5]})", "stop"},
      {R"({"stop": ""})", "stop"},
      {R"({"stop_token_ids": [1, 512]})", "stop_token_ids"},
      {R"({"stop_token_ids": 3})", "stop_token_ids"},
      {R"({"ignore_eos": 1})", "ignore_eos"},
      {R"({"min_tokens": -1})", "min_tokens"},
      {R"({"min_tokens": 5, "max_tokens": 4})", "min_tokens"},
      {R"({"skip_special_tokens": "no"})", "skip_special_tokens"},
      {R"({"include_stop_str_in_output": null, "echo": 1, "include_stop_str_in_output": 0})",
       "include_stop_str_in_output"},
      {R"({"max_tokens": -1})", "max_tokens"},
      {R"({"max_tokens": "16"})", "max_tokens"},
      {R"({"max_completion_tokens": 1e12})", "max_completion_tokens"},
      {R"({"use_beam_search": "yes"})", "use_beam_search"},
      {R"({"length_penalty": "x"})", "length_penalty"},
      {R"({"early_stopping": "sometimes"})", "early_stopping"},
      {R"({"priority": 1.5})", "priority"},
      {R"({"user": 7})", "user"},
      {R"({"stream": "true"})", "stream"},
      {R"({"stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"stream": true, "stream_options": []})", "stream_options"},
      {R"({"stream": true, "stream_options": {"include_usage": "yes"}})",
       "stream_options.include_usage"},
      {R"({"stream": true, "n": 1, "best_of": 2})", "stream"},
      {R"({"stream": true, "use_beam_search": true})", "stream"},
      {R"({"response_format": {"type": 7}})", "response_format.type"},
      {R"({"use_beam_search": true, "guided_regex": "a"})", "use_beam_search"},
  };
  for (const auto& [body, param] : cases) {
    auto error = read_error(body);
    ASSERT_TRUE(error.has_value()) << body;
    EXPECT_EQ(error->param, param) << body << " → " << error->message;
    EXPECT_EQ(error->status, 400);
    EXPECT_NE(error->message.find(param), std::string::npos) << error->message;
  }
}

TEST(SamplingRequest, OutOfRangeTextIsTheEnginesOwn) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"temperature": 2.5})",
       "'temperature' = 2.5 is out of range: must be a finite number >= 0 and at most 2"},
      {R"({"top_k": -2})", "'top_k' = -2 is out of range: must be in [-1, 2147483647]"},
      {R"({"n": 3, "best_of": 2})", "'best_of' = 2 is out of range: must be in [3, 128]"},
      {R"({"min_tokens": 5, "max_tokens": 4})",
       "'min_tokens' = 5 is out of range: must be in [0, 4]"},
      {R"({"stop_token_ids": [512]})",
       "'stop_token_ids' = 512 is out of range: must be a token id in [0, 512)"},
      {R"({"logit_bias": {"7": 101}})",
       "'logit_bias' = 101 is out of range: must be a bias in [-100, 100]"},
  };
  for (const auto& [body, message] : cases) {
    auto error = read_error(body);
    ASSERT_TRUE(error.has_value()) << body;
    EXPECT_EQ(error->message, message) << body;
  }
  // The same text from SamplingParams::validate, which the engine applies.
  SamplingParams p;
  p.temperature = 2.5f;
  EXPECT_EQ(p.validate(kVocab).error().message, cases[0].second);
}

TEST(SamplingRequest, AcceptsValidFieldsAndIgnoresUnknownOnes) {
  json body = json::parse(R"({
    "n": 2, "best_of": 3, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": -1,
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
    "logit_bias": {"7": -100, "9": 2.5}, "stop": "END", "stop_token_ids": [2, 3], "ignore_eos": true,
    "min_tokens": 2, "skip_special_tokens": false, "include_stop_str_in_output": true,
    "max_tokens": 10, "max_completion_tokens": 20, "priority": -3, "user": "u", "stream": false,
    "response_format": {"type": "text"}, "some_future_field": {"x": 1}, "metadata": null})");
  FieldReader reader(body);
  SamplingRequest r = read_sampling_request(reader, kVocab);
  ASSERT_FALSE(reader.error().has_value()) << reader.error()->message;
  EXPECT_EQ(r.max_tokens, 20);  // max_completion_tokens wins
  const SamplingParams& p = r.params;
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.best_of, 3);
  EXPECT_FLOAT_EQ(*p.temperature, 0.7f);
  EXPECT_FLOAT_EQ(*p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(*p.min_p, 0.05f);
  EXPECT_EQ(p.seed, std::numeric_limits<uint64_t>::max());  // -1 as 64-bit two's complement
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(*p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.logit_bias, (std::map<int32_t, float>{{7, -100.0f}, {9, 2.5f}}));
  EXPECT_EQ(p.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_EQ(p.max_tokens, 20);
  EXPECT_FALSE(p.logprobs.has_value());
  EXPECT_EQ(r.priority, -3);
}

TEST(SamplingRequest, UnsetFieldsStayUnsetForModelDefaults) {
  json body = json::object();
  FieldReader reader(body);
  const SamplingParams params = read_sampling_request(reader, kVocab).params;
  ASSERT_FALSE(reader.error().has_value());
  EXPECT_FALSE(params.temperature.has_value());
  EXPECT_FALSE(params.top_p.has_value());
  EXPECT_FALSE(params.top_k.has_value());
  EXPECT_FALSE(params.seed.has_value());
  EXPECT_EQ(params.n, 1);
}

TEST(SamplingRequest, RepeatedStopTokenIdsAreKeptOnce) {
  // A body may repeat ids without bound; the engine walks the list per step.
  json body = json::object();
  body["stop_token_ids"] = json::array();
  for (int i = 0; i < 100000; ++i) body["stop_token_ids"].push_back(7 + i % 3);
  FieldReader reader(body);
  const SamplingParams params = read_sampling_request(reader, kVocab).params;
  ASSERT_FALSE(reader.error().has_value());
  EXPECT_EQ(params.stop_token_ids, (std::vector<int32_t>{7, 8, 9}));
}

TEST(SamplingRequest, ContinuousUsageStatsIsRefusedNotIgnored) {
  json body = json::parse(
      R"({"stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  FieldReader reader(body);
  read_sampling_request(reader, kVocab);
  ASSERT_TRUE(reader.error().has_value());
  EXPECT_EQ(reader.error()->param, "stream_options.continuous_usage_stats");
  json off = json::parse(R"({"stream": true, "stream_options": {"continuous_usage_stats": false}})");
  FieldReader accepted(off);
  read_sampling_request(accepted, kVocab);
  EXPECT_FALSE(accepted.error().has_value());
}

TEST(SamplingRequest, AllowedTokenIdsAreSortedOnceAndValidated) {
  json body = json::parse(R"({"allowed_token_ids": [9, 3, 9, 0]})");
  FieldReader reader(body);
  const SamplingParams params = read_sampling_request(reader, kVocab).params;
  ASSERT_FALSE(reader.error().has_value()) << reader.error()->message;
  EXPECT_EQ(params.allowed_token_ids, (std::vector<int32_t>{0, 3, 9}));
  const std::vector<std::pair<const char*, const char*>> refused = {
      {R"({"allowed_token_ids": []})", "must hold at least one token id"},
      {R"({"allowed_token_ids": [1, 512]})", "'allowed_token_ids' = 512 is out of range"},
      {R"({"allowed_token_ids": [-1]})", "'allowed_token_ids' = -1 is out of range"},
      {R"({"allowed_token_ids": "1"})", "allowed_token_ids"},
      {R"({"allowed_token_ids": [1.5]})", "allowed_token_ids"},
      {R"({"allowed_token_ids": [4], "use_beam_search": true, "n": 2})",
       "'allowed_token_ids' cannot be used with beam search"},
  };
  for (const auto& [text, want] : refused) {
    auto error = read_error(text);
    ASSERT_TRUE(error.has_value()) << text;
    EXPECT_EQ(error->status, 400) << text;
    EXPECT_EQ(error->param, "allowed_token_ids") << text;
    EXPECT_NE(error->message.find(want), std::string::npos) << text << " -> " << error->message;
  }
}

TEST(SamplingRequest, BeamSearch) {
  json body = json::parse(R"({"use_beam_search": true, "n": 2, "best_of": 4, "length_penalty": 0.5,
                              "early_stopping": "never"})");
  FieldReader reader(body);
  const SamplingParams params = read_sampling_request(reader, kVocab).params;
  ASSERT_FALSE(reader.error().has_value()) << reader.error()->message;
  EXPECT_TRUE(params.use_beam_search);
  EXPECT_EQ(params.beam_width, 4);
  EXPECT_EQ(params.n, 2);
  EXPECT_FALSE(params.best_of.has_value());
  EXPECT_FLOAT_EQ(params.length_penalty, 0.5f);
  EXPECT_EQ(params.early_stopping, EarlyStopping::kNever);
}

// engine/request_fit.h's fit_context, answered as the server does.
ApiResult<int64_t> fit_context(int64_t num_prompt_tokens, std::optional<int64_t> requested,
                               std::optional<int64_t> default_max, int64_t max_model_len,
                               const char* prompt_param) {
  ModelInfo info;
  info.max_model_len = max_model_len;
  auto fitted = pagoda::fit_context(info, {.num_prompt_tokens = num_prompt_tokens,
                                           .max_tokens = requested,
                                           .default_max_tokens = default_max,
                                           .prompt_name = prompt_param});
  if (!fitted.ok()) return request_limit_error(fitted.error(), prompt_param);
  return fitted.value();
}

TEST(FitContext, DefaultsAndOverflow) {
  EXPECT_EQ(fit_context(10, std::nullopt, 16, 100, "prompt").value(), 16);
  EXPECT_EQ(fit_context(90, std::nullopt, 16, 100, "prompt").value(), 10);
  EXPECT_EQ(fit_context(90, std::nullopt, std::nullopt, 100, "messages").value(), 10);
  EXPECT_EQ(fit_context(90, 10, 16, 100, "prompt").value(), 10);
  auto too_long = fit_context(90, 11, 16, 100, "messages");
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code, "context_length_exceeded");
  EXPECT_EQ(too_long.error().param, "messages");
  EXPECT_EQ(
      too_long.error().message,
      "This model's maximum context length is 100 tokens. However, you requested 101 tokens (90 in "
      "the "
      "messages, 11 in the completion). Please reduce the length of the messages or completion.");
  EXPECT_FALSE(fit_context(100, std::nullopt, 16, 100, "prompt").ok());
}

}  // namespace
}  // namespace pagoda::openai
