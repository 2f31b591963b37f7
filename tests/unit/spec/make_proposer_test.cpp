#include "spec/make_proposer.h"

#include <gtest/gtest.h>

#include "spec/ngram_proposer.h"
#include "spec/suffix_proposer.h"

namespace pagoda {
namespace {

TEST(MakeSpecProposer, BuildsNgramAndSuffix) {
  auto ngram = make_spec_proposer(*parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2})"));
  ASSERT_TRUE(ngram.ok());
  EXPECT_NE(dynamic_cast<NgramProposer*>(ngram->get()), nullptr);
  auto suffix = make_spec_proposer(*parse_speculative_config(R"({"method": "suffix"})"));
  ASSERT_TRUE(suffix.ok());
  EXPECT_NE(dynamic_cast<SuffixProposer*>(suffix->get()), nullptr);
}

TEST(MakeSpecProposer, RefusesDraftModelAndOff) {
  auto draft = make_spec_proposer(*parse_speculative_config(
      R"({"method": "draft_model", "model": "x", "num_speculative_tokens": 3})"));
  ASSERT_FALSE(draft.ok());
  EXPECT_EQ(draft.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(draft.error().message.find("built by the engine"), std::string::npos);
  EXPECT_FALSE(make_spec_proposer(SpeculativeConfig{}).ok());
}

}  // namespace
}  // namespace pagoda
