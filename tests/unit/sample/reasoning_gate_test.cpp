// The reasoning gate: every token while reasoning (exactly the ids below the
// vocabulary size), the inner constraint from its start once the end ids are
// sampled, the qwen3-style first step, and independent clones.
#include "sample/reasoning_gate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "sequence_constraint.h"

namespace pagoda {
namespace {

using testing::allowed_ids;
using testing::SequenceConstraint;

constexpr int64_t kVocab = 70;  // three mask words, the last one partial
constexpr int32_t kEos = 2;

std::vector<int32_t> all_ids() {
  std::vector<int32_t> ids(kVocab);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

std::shared_ptr<const CompiledConstraint> gate(std::vector<int32_t> end_ids,
                                               std::optional<int32_t> open_id = std::nullopt) {
  auto inner = std::make_shared<SequenceConstraint>(std::vector<int32_t>{10, 11}, kEos);
  return make_reasoning_gate(inner, {std::move(end_ids), kVocab, open_id});
}

// Accepts `tokens` (each must be allowed by the mask first).
void accept_all(TokenConstraint& state, const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) {
    const auto allowed = allowed_ids(state, kVocab);
    ASSERT_TRUE(std::find(allowed.begin(), allowed.end(), t) != allowed.end()) << t;
    ASSERT_TRUE(state.accept(t)) << t;
  }
}

TEST(ReasoningGate, AllowsEveryTokenUntilTheEndTokenThenTheInnerConstraint) {
  auto state = gate({50})->start();
  EXPECT_EQ(allowed_ids(*state, kVocab), all_ids());  // bits 70..95 stay clear
  accept_all(*state, {33, 11, 10, kEos, 69, 0});
  EXPECT_FALSE(state->is_finished());
  EXPECT_EQ(allowed_ids(*state, kVocab), all_ids());
  ASSERT_TRUE(state->accept(50));
  EXPECT_EQ(allowed_ids(*state, kVocab), std::vector<int32_t>{10});
  EXPECT_FALSE(state->accept(11));  // refused: the state stays
  EXPECT_EQ(allowed_ids(*state, kVocab), std::vector<int32_t>{10});
  accept_all(*state, {10, 11});
  EXPECT_TRUE(state->is_finished());
  EXPECT_EQ(allowed_ids(*state, kVocab), std::vector<int32_t>{kEos});
  EXPECT_TRUE(state->accept(kEos));
}

TEST(ReasoningGate, MultiTokenEndSequenceMustBeSampledInOrder) {
  auto state = gate({7, 8, 9})->start();
  accept_all(*state, {7, 8, 3, 8, 9, 7, 7, 8});
  EXPECT_EQ(allowed_ids(*state, kVocab), all_ids());
  ASSERT_TRUE(state->accept(9));
  EXPECT_EQ(allowed_ids(*state, kVocab), std::vector<int32_t>{10});
  EXPECT_FALSE(state->accept(7));  // the answer is constrained, markers included
}

TEST(ReasoningGate, OutOfVocabularyTokensAreRefusedWhileReasoning) {
  auto state = gate({50})->start();
  EXPECT_FALSE(state->accept(kVocab));
  EXPECT_FALSE(state->accept(-1));
  EXPECT_EQ(allowed_ids(*state, kVocab), all_ids());
}

TEST(ReasoningGate, OpenTokenFirstStartsTheReasoning) {
  auto state = gate({50}, 40)->start();
  EXPECT_EQ(allowed_ids(*state, kVocab), (std::vector<int32_t>{10, 40}));
  EXPECT_FALSE(state->accept(11));
  ASSERT_TRUE(state->accept(40));
  EXPECT_EQ(allowed_ids(*state, kVocab), all_ids());
  accept_all(*state, {40, 10, 50});
  EXPECT_EQ(allowed_ids(*state, kVocab), std::vector<int32_t>{10});
}

TEST(ReasoningGate, AnyOtherFirstTokenIsTheConstrainedAnswer) {
  auto state = gate({50}, 40)->start();
  ASSERT_TRUE(state->accept(10));
  EXPECT_EQ(allowed_ids(*state, kVocab), std::vector<int32_t>{11});
  EXPECT_FALSE(state->accept(40));
  EXPECT_FALSE(state->accept(50));
  accept_all(*state, {11});
  EXPECT_TRUE(state->is_finished());
}

TEST(ReasoningGate, ClonesAreIndependent) {
  auto compiled = gate({7, 8});
  auto a = compiled->start();
  accept_all(*a, {1, 7});
  auto b = a->clone();
  ASSERT_TRUE(a->accept(8));
  EXPECT_EQ(allowed_ids(*a, kVocab), std::vector<int32_t>{10});
  EXPECT_EQ(allowed_ids(*b, kVocab), all_ids());
  ASSERT_TRUE(b->accept(8));  // b saw 7 before the clone too
  accept_all(*b, {10});
  EXPECT_EQ(allowed_ids(*a, kVocab), std::vector<int32_t>{10});
  EXPECT_EQ(allowed_ids(*b, kVocab), std::vector<int32_t>{11});
  // Each start() is a fresh sample.
  EXPECT_EQ(allowed_ids(*compiled->start(), kVocab), all_ids());
}

}  // namespace
}  // namespace pagoda
