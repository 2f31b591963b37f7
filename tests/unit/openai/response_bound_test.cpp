// The response-size bound: the estimate's inputs and the refusal at the bound.
#include <gtest/gtest.h>

#include "openai/response_bound.h"

namespace pagoda::openai {
namespace {

TEST(ResponseBound, IssueExampleIsOverTheDefaultBoundAndNamesTheFields) {
  // n 128, max_tokens 500, logprobs 20 on /v1/completions: its answer grew
  // past 64 MiB on stories260K.
  ResponseShape shape{false, 128, 500, 20, 0, 0};
  auto error = check_response_size(shape, 9, kDefaultMaxResponseBytes);  // stories260K's longest piece
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, 400);
  for (const char* word : {"max_tokens", "n", "logprobs", "--max-response-bytes", "67108864"}) {
    EXPECT_NE(error->message.find(word), std::string::npos) << word << ": " << error->message;
  }
}

TEST(ResponseBound, RefusesExactlyAboveTheBound) {
  ResponseShape shape{true, 4, 100, 5, 0, 0};
  const int64_t estimate = estimate_response_bytes(shape, 12);
  EXPECT_FALSE(check_response_size(shape, 12, estimate).has_value());
  EXPECT_TRUE(check_response_size(shape, 12, estimate - 1).has_value());
}

TEST(ResponseBound, EveryInputRaisesTheEstimate) {
  const ResponseShape base{false, 2, 50, -1, 0, 0};
  const int64_t b = estimate_response_bytes(base, 12);
  auto more = [&](auto change) {
    ResponseShape s = base;
    change(s);
    return estimate_response_bytes(s, 12) > b;
  };
  EXPECT_TRUE(more([](ResponseShape& s) { s.num_choices = 3; }));
  EXPECT_TRUE(more([](ResponseShape& s) { s.max_tokens = 51; }));
  EXPECT_TRUE(more([](ResponseShape& s) { s.logprobs = 0; }));
  EXPECT_TRUE(more([](ResponseShape& s) { s.echo_bytes = 10; }));
  EXPECT_TRUE(more([](ResponseShape& s) { s.chat = true, s.logprobs = 1; }));
  EXPECT_TRUE(more([](ResponseShape& s) { s.token_ids = true; }));
  EXPECT_TRUE(more([](ResponseShape& s) { s.chat = true, s.reasoning = true; }));
  EXPECT_TRUE(more([](ResponseShape& s) { s.prompt_tokens = 10, s.prompt_logprobs = 0; }));
  EXPECT_TRUE(more([](ResponseShape& s) { s.prompt_tokens = 10, s.token_ids = true; }));
  EXPECT_GT(estimate_response_bytes(base, 16), estimate_response_bytes(base, 4));
  // Chat entries carry a bytes array: more per token than completions'.
  ResponseShape chat = base, completions = base;
  chat.chat = true, chat.logprobs = completions.logprobs = 5;
  EXPECT_GT(estimate_response_bytes(chat, 12), estimate_response_bytes(completions, 12));
}

// prompt_logprobs: each prompt token lists itself and its alternatives.
TEST(ResponseBound, PromptLogprobsGrowWithTheirCount) {
  ResponseShape shape{false, 1, 1, -1, 0, 0};
  shape.prompt_tokens = 1000;
  shape.prompt_logprobs = 0;
  const int64_t zero = estimate_response_bytes(shape, 9);
  shape.prompt_logprobs = 20;
  EXPECT_GT(estimate_response_bytes(shape, 9) - zero, 1000 * 20 * 60);
}

}  // namespace
}  // namespace pagoda::openai
