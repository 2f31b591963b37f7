// allowed_draft_length (engine/constrained_draft.h) over a token automaton
// (constraint_doubles.h): a draft is cut at the first token that
// allowed_token_ids or the constraint refuses, after the token that
// finishes the constraint, and never changes the sample's state.
#include "engine/constrained_draft.h"

#include <gtest/gtest.h>

#include "constraint_doubles.h"
#include "sample/token_mask.h"

namespace pagoda::test {
namespace {

constexpr int64_t kVocab = 64;
const std::vector<int32_t> kEos = {2};

TEST(ConstrainedDraft, UnconstrainedDraftsAreCutOnlyByAllowedTokenIds) {
  const std::vector<int32_t> draft = {5, 6, 7, 8};
  EXPECT_EQ(allowed_draft_length(draft, {}), 4u);
  const std::vector<uint32_t> allowed = pack_token_mask(std::vector<int32_t>{5, 6, 8}, kVocab);
  EXPECT_EQ(allowed_draft_length(draft, {.allowed = allowed}), 2u);
}

TEST(ConstrainedDraft, CutAtARefusalAndAfterTheFinishingToken) {
  AutomatonConstraint c(TokenAutomaton::sequences({{5, 6, 7}, {5, 9}}, kEos, kVocab));
  std::unique_ptr<TokenConstraint> state = c.start();
  EXPECT_EQ(allowed_draft_length(std::vector<int32_t>{5, 6, 7}, {.constraint = state.get()}), 3u);
  EXPECT_EQ(allowed_draft_length(std::vector<int32_t>{5, 6, 9, 7}, {.constraint = state.get()}),
            2u);
  // 5 9 finishes the constraint: nothing may follow, not even the EOS.
  EXPECT_EQ(allowed_draft_length(std::vector<int32_t>{5, 9, 2, 5}, {.constraint = state.get()}),
            2u);
  // Both limits: allowed_token_ids refuses 6.
  const std::vector<uint32_t> allowed = pack_token_mask(std::vector<int32_t>{5, 7, 9}, kVocab);
  EXPECT_EQ(allowed_draft_length(std::vector<int32_t>{5, 6, 7},
                                 {.constraint = state.get(), .allowed = allowed}),
            1u);
  // The sample's own state has accepted nothing.
  EXPECT_TRUE(state->accept(5));
  EXPECT_EQ(allowed_draft_length(std::vector<int32_t>{9}, {.constraint = state.get()}), 1u);
  EXPECT_EQ(allowed_draft_length(std::vector<int32_t>{5}, {.constraint = state.get()}), 0u);
}

}  // namespace
}  // namespace pagoda::test
