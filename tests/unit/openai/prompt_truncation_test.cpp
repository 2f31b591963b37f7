// truncate_prompt_tokens / truncation_side: reading, the -1 rule and the limit
// (vLLM's max_model_len - max_tokens), and which side is kept.
#include "openai/prompt_truncation.h"

#include <gtest/gtest.h>

namespace pagoda::openai {
namespace {

PromptTruncation read(const Json& body, std::optional<ApiError>* error = nullptr) {
  FieldReader reader(body);
  PromptTruncation out = read_prompt_truncation(reader);
  if (error) *error = reader.error();
  return out;
}

TEST(PromptTruncation, ReadsTheFields) {
  EXPECT_FALSE(read(Json::object()).active());
  EXPECT_EQ(read({{"truncate_prompt_tokens", 5}}).num_tokens, 5);
  EXPECT_FALSE(read({{"truncate_prompt_tokens", 5}}).keep_first);
  EXPECT_TRUE(read({{"truncate_prompt_tokens", -1}, {"truncation_side", "right"}}).keep_first);
  for (const Json& bad : {Json{{"truncate_prompt_tokens", 0}}, Json{{"truncate_prompt_tokens", -2}},
                          Json{{"truncate_prompt_tokens", "5"}},
                          Json{{"truncate_prompt_tokens", 5}, {"truncation_side", "up"}},
                          Json{{"truncation_side", "left"}}}) {
    std::optional<ApiError> error;
    read(bad, &error);
    ASSERT_TRUE(error.has_value()) << bad.dump();
    EXPECT_TRUE(error->param == "truncate_prompt_tokens" || error->param == "truncation_side")
        << error->param;
  }
}

TEST(PromptTruncation, MinusOneKeepsWhatTheContextLeaves) {
  const PromptTruncation all = read({{"truncate_prompt_tokens", -1}});
  EXPECT_EQ(truncation_length(all, 512, 16, "max_tokens").value(), 496);
  auto none_left = truncation_length(all, 512, 512, "max_tokens");
  ASSERT_FALSE(none_left.ok());
  EXPECT_EQ(none_left.error().param, "truncate_prompt_tokens");
}

TEST(PromptTruncation, MoreThanTheInputLimitIsRefused) {
  const PromptTruncation t = read({{"truncate_prompt_tokens", 497}});
  auto error = truncation_length(t, 512, 16, "max_completion_tokens");
  ASSERT_FALSE(error.ok());
  for (const char* word : {"497", "496", "max_completion_tokens", "512"}) {
    EXPECT_NE(error.error().message.find(word), std::string::npos) << error.error().message;
  }
  EXPECT_EQ(
      truncation_length(read({{"truncate_prompt_tokens", 496}}), 512, 16, "max_tokens").value(),
      496);
}

TEST(PromptTruncation, KeepsTheLastTokensUnlessRight) {
  std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  EXPECT_TRUE(truncate_prompt(read({{"truncate_prompt_tokens", 2}}), 2, ids));
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 5}));
  ids = {1, 2, 3, 4, 5};
  EXPECT_TRUE(
      truncate_prompt(read({{"truncate_prompt_tokens", 2}, {"truncation_side", "right"}}), 2, ids));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(truncate_prompt(read({{"truncate_prompt_tokens", 9}}), 9, ids));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
}

}  // namespace
}  // namespace pagoda::openai
