// request_log_line: what --enable-log-requests logs, cut to --max-log-len.
#include "openai/request_log.h"

#include <gtest/gtest.h>

#include <vector>

namespace pagoda::openai {
namespace {

TEST(RequestLog, WholePromptAndTheSetParams) {
  SamplingParams params;
  params.temperature = 0.5f;
  params.max_tokens = 8;
  params.seed = 3;
  params.stop = {"\n"};
  const std::vector<int32_t> ids = {1, 2, 3};
  const std::string line = request_log_line("cmpl-x-0", "say \"hi\"\n", ids, params, std::nullopt);
  EXPECT_EQ(
      line.find("request cmpl-x-0: prompt: \"say \\\"hi\\\"\\n\", prompt_token_ids: [1, 2, 3], "
                "params: {"),
      0u)
      << line;
  EXPECT_NE(line.find("\"temperature\":0.5"), std::string::npos) << line;
  EXPECT_NE(line.find("\"max_tokens\":8"), std::string::npos) << line;
  EXPECT_NE(line.find("\"seed\":3"), std::string::npos) << line;
  EXPECT_NE(line.find("\"stop\":[\"\\n\"]"), std::string::npos) << line;
  EXPECT_EQ(line.find("top_p"), std::string::npos) << line;  // unset: not shown
}

TEST(RequestLog, MaxLogLenCutsCharactersNotBytes) {
  const std::vector<int32_t> ids = {5, 6, 7, 8};
  // "héllo" : the cut after 2 characters keeps the 2-byte é whole.
  const std::string line = request_log_line("r", "h\xC3\xA9llo", ids, SamplingParams{}, 2);
  EXPECT_NE(line.find("prompt: \"h\xC3\xA9\"..., prompt_token_ids: [5, 6, ...]"), std::string::npos)
      << line;
  const std::string whole = request_log_line("r", "ab", ids, SamplingParams{}, 2);
  EXPECT_NE(whole.find("prompt: \"ab\", "), std::string::npos) << whole;
}

}  // namespace
}  // namespace pagoda::openai
