// Scheduler::replace_last_token (structured output's jump-forward): the
// sampled, not yet computed last token becomes several, their blocks are
// allocated at once (copy-on-write copies go with the next step), the next
// step computes them as one chunk and samples after the last, the prefix
// cache hashes only the tokens that were computed, and every refusal leaves
// the scheduler unchanged. Under async scheduling (replace_in_flight) the
// last token that the step in flight computes is replaced there.
#include <gtest/gtest.h>

#include "sched_harness.h"

namespace pagoda {
namespace {

using testing::expect_invariants;
using testing::Harness;
using testing::Ids;
using testing::small_config;
using testing::tokens_from;

TEST(SchedulerJump, ReplacedTokensRunAsOneChunkAndSampleAfterTheLast) {
  Harness h(small_config(16, 4, 64));
  SeqId seq = h.add(1, tokens_from(1, 6));
  h.step();  // prefill; samples x at position 6
  const Sequence* q = h.s.sequence(seq);
  ASSERT_EQ(q->num_tokens(), 7);
  ASSERT_EQ(q->num_uncomputed(), 1);
  const Ids jump = {700, 701, 702, 703, 704};
  ASSERT_TRUE(h.s.replace_last_token(seq, jump).ok());
  expect_invariants(h.s);
  EXPECT_EQ(h.output(seq), jump);
  EXPECT_EQ(q->num_computed_tokens, 6);
  // Positions 6..10 need blocks 1 and 2: allocated now.
  EXPECT_EQ(h.s.kv().block_table(seq).size(), 3u);
  ScheduleOutput out = h.step();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].start_position, 6);
  EXPECT_EQ(out.seqs[0].num_new_tokens, 5);
  EXPECT_EQ(Ids(out.token_ids.begin(), out.token_ids.end()), jump);
  ASSERT_EQ(out.logits_rows.size(), 1u);
  EXPECT_EQ(out.logits_rows[0], 4);
  EXPECT_EQ(q->num_computed_tokens, 11);
  EXPECT_EQ(q->num_tokens(), 12);  // the token sampled after the jump
  h.step();
  EXPECT_EQ(q->num_computed_tokens, 12);
}

// Blocks are hashed from the tokens that were computed: the jump's, never
// the replaced token's.
TEST(SchedulerJump, PrefixCacheHoldsTheReplacementNotTheReplacedToken) {
  Harness h(small_config(32, 4, 64));
  const Ids prompt = tokens_from(1, 6);
  SeqId seq = h.add(1, prompt);
  h.step();
  const int32_t replaced = h.s.sequence(seq)->tokens.back();
  ASSERT_TRUE(h.s.replace_last_token(seq, Ids{900, 901, 902}).ok());
  h.step();  // computes positions 6..8: block 1 (4..7) is full
  Ids with_jump = prompt;
  with_jump.insert(with_jump.end(), {900, 901, 50, 51});
  Ids with_replaced = prompt;
  with_replaced.insert(with_replaced.end(), {replaced, 901, 50, 51});
  EXPECT_EQ(h.s.kv().find_prefix(with_jump, {}).num_tokens, 8);
  EXPECT_EQ(h.s.kv().find_prefix(with_replaced, {}).num_tokens, 4);
  expect_invariants(h.s);
}

TEST(SchedulerJump, RefusalsChangeNothing) {
  SchedulerConfig c = small_config(6, 4, 64);  // max_model_len 24
  Harness h(c);
  SeqId seq = h.add(1, tokens_from(1, 6), 0, 1, /*max_new_tokens=*/8);
  SeqId waiting = h.add(2, tokens_from(1, 9));
  // The refusal's code (kInternal stands for "accepted", which none is).
  auto code = [&](SeqId s, const Ids& t) {
    Status st = h.s.replace_last_token(s, t);
    return st.ok() ? ErrorCode::kInternal : st.error().code;
  };
  EXPECT_EQ(code(seq, {5}), ErrorCode::kInvalidArgument);  // nothing sampled yet
  ScheduleOutput out = h.s.schedule();                     // both prefill (blocks 2 + 3)
  EXPECT_EQ(code(seq, {5}), ErrorCode::kInvalidArgument);  // in flight
  const int32_t x = testing::fake_next_token(h.s.sequence(seq)->tokens);
  ASSERT_TRUE(h.s.update(std::vector<SampledToken>{{seq, x}}).ok());
  const Sequence* q = h.s.sequence(seq);
  const Ids before = q->tokens;
  EXPECT_EQ(code(seq, {}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(seq, {5, -1}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(seq, tokens_from(5, 9)),
            ErrorCode::kInvalidArgument);  // 9 outputs > max_new_tokens 8
  EXPECT_EQ(code(waiting, {5}),
            ErrorCode::kInvalidArgument);  // its prompt is computed, not a sample
  EXPECT_EQ(code(12345, {5}), ErrorCode::kNotFound);
  // One block is free: positions 6..7 fit block 1, 8.. would need two more.
  EXPECT_EQ(h.s.kv().num_allocatable_blocks(), 1);
  EXPECT_EQ(code(seq, tokens_from(5, 8)), ErrorCode::kResourceExhausted);
  EXPECT_EQ(q->tokens, before);
  EXPECT_EQ(h.s.kv().num_allocatable_blocks(), 1);
  expect_invariants(h.s);
  EXPECT_TRUE(h.s.replace_last_token(seq, tokens_from(5, 6)).ok());  // 6..11: blocks 1, 2
  EXPECT_EQ(h.s.kv().num_allocatable_blocks(), 0);
  expect_invariants(h.s);
  h.step();
  expect_invariants(h.s);
}

TEST(SchedulerJump, MaxModelLenBoundsTheReplacement) {
  SchedulerConfig c = small_config(16, 4, 64);
  c.max_model_len = 10;
  Harness h(c);
  SeqId seq = h.add(1, tokens_from(1, 6));
  h.step();
  EXPECT_FALSE(h.s.replace_last_token(seq, tokens_from(5, 5)).ok());  // 11 tokens
  EXPECT_TRUE(h.s.replace_last_token(seq, tokens_from(5, 4)).ok());   // 10
  expect_invariants(h.s);
}

// A jump in one sample of a forked group: its shared partial block is
// copied before the step that writes it; the sibling keeps the original.
TEST(SchedulerJump, CopyOnWriteOfASharedBlockGoesWithTheNextStep) {
  Harness h(small_config(16, 4, 64));
  SeqId p = h.add(1, tokens_from(1, 6), 0, /*num_seqs=*/2, /*max_new_tokens=*/8);
  h.step(/*hold=*/{1});
  auto seqs = h.s.branch(1, std::vector<Branch>{{p, 501}, {p, 502}});
  ASSERT_TRUE(seqs.ok());
  const SeqId a = (*seqs)[0], b = (*seqs)[1];
  const int32_t shared = h.s.kv().block_table(a)[1];
  ASSERT_EQ(h.s.kv().ref_count(shared), 2);
  ASSERT_TRUE(h.s.replace_last_token(a, Ids{600, 601, 602}).ok());
  const int32_t own = h.s.kv().block_table(a)[1];
  EXPECT_NE(own, shared);
  EXPECT_EQ(h.s.kv().block_table(b)[1], shared);
  expect_invariants(h.s);
  ScheduleOutput out = h.step();
  bool copied = false;
  for (size_t i = 0; i < out.copy_src.size(); ++i)
    copied = copied || (out.copy_src[i] == shared && out.copy_dst[i] == own);
  EXPECT_TRUE(copied);
  EXPECT_EQ(h.s.sequence(a)->num_computed_tokens, 9);
  EXPECT_EQ(h.s.sequence(b)->num_computed_tokens, 7);
}

// A copy whose sequence ended before the next step is dropped; the
// jumped tokens survive preemption and are recomputed.
TEST(SchedulerJump, FinishedOrPreemptedAfterAJump) {
  Harness h(small_config(16, 4, 64));
  SeqId p = h.add(1, tokens_from(1, 6), 0, /*num_seqs=*/2, /*max_new_tokens=*/8);
  h.step(/*hold=*/{1});
  auto seqs = h.s.branch(1, std::vector<Branch>{{p, 501}, {p, 502}});
  ASSERT_TRUE(seqs.ok());
  ASSERT_TRUE(h.s.replace_last_token((*seqs)[0], Ids{600, 601}).ok());
  ASSERT_TRUE(h.s.finish((*seqs)[0], SeqEndReason::kStop).ok());
  ScheduleOutput out = h.step();
  EXPECT_TRUE(out.copy_src.empty());
  expect_invariants(h.s);

  // Pool of 5 blocks: the jump takes the last free one, so the next growth
  // of the earlier request preempts the jumped one, which keeps its tokens
  // and recomputes them.
  Harness g(small_config(5, 4, 64));
  SeqId s2 = g.add(2, tokens_from(1, 7), 0, 1, /*max_new_tokens=*/8);
  SeqId s1 = g.add(1, tokens_from(1, 6), /*priority=*/1, 1, /*max_new_tokens=*/8);
  g.step();  // both prefill: 2 + 2 blocks
  ASSERT_TRUE(
      g.s.replace_last_token(s1, Ids{600, 601, 602}).ok());  // positions 6..8: a third block
  EXPECT_EQ(g.s.kv().num_allocatable_blocks(), 0);
  g.step();  // s2 decodes position 7, s1 computes its jump and samples
  const Sequence* a = g.s.sequence(s1);
  ASSERT_EQ(a->num_computed_tokens, 9);
  g.step();  // s2 needs a block for position 8: s1 is preempted
  EXPECT_EQ(g.s.stats().num_preemptions, 1);
  EXPECT_EQ(a->num_computed_tokens, 0);
  EXPECT_EQ(Ids(a->tokens.begin() + 6, a->tokens.begin() + 9), (Ids{600, 601, 602}));
  ASSERT_TRUE(g.s.finish(s2, SeqEndReason::kLength).ok());
  g.step();  // s1 is admitted again and recomputes everything, then samples
  EXPECT_EQ(a->num_computed_tokens, a->num_tokens() - 1);
  EXPECT_EQ(a->num_tokens(), 11);
  expect_invariants(g.s);
}

// A refusal's code (kInternal stands for "accepted").
ErrorCode code_of(const Status& st) {
  return st.ok() ? ErrorCode::kInternal : st.error().code;
}

// Async scheduling: the step planned ahead computes y (its placeholder
// resolved); the jump replaces y there, that step's work on y is voided, and
// the next step planned ahead, where the sequence is not pending, computes
// the jump's tokens from y's position as one chunk.
TEST(SchedulerJump, ReplaceInFlightVoidsTheTokenInFlight) {
  Harness h(small_config(16, 4, 64));
  SeqId seq = h.add(1, tokens_from(1, 6));
  h.step();  // prefill; x sampled at position 6
  const Sequence* q = h.s.sequence(seq);
  ScheduleOutput first = h.s.schedule();                               // computes x, samples y
  ScheduleOutput ahead = h.s.schedule_ahead(std::vector<SeqId>{seq});  // computes y's placeholder
  ASSERT_EQ(ahead.seqs.size(), 1u);
  EXPECT_EQ(code_of(h.s.replace_in_flight(seq, Ids{700})), ErrorCode::kInvalidArgument)
      << "the placeholder of y is still open";
  ASSERT_TRUE(h.s.resolve(std::vector<SampledToken>{{seq, 555}}).ok());
  ASSERT_EQ(q->num_tokens(), 8);  // prompt 6, x, y = 555
  const Ids jump = {700, 701, 702};
  ASSERT_TRUE(h.s.replace_in_flight(seq, jump).ok());
  expect_invariants(h.s);
  EXPECT_EQ(q->num_tokens(), 10);
  EXPECT_EQ(h.s.kv().block_table(seq).size(), 3u);  // positions 0..9
  // The sample of the step in flight is dropped: the sequence is not pending.
  ScheduleOutput after = h.s.schedule_ahead({});
  EXPECT_EQ(q->num_computed_tokens, 7);  // y's position was not counted
  ASSERT_EQ(after.seqs.size(), 1u);
  EXPECT_EQ(after.seqs[0].start_position, 7);
  EXPECT_EQ(after.seqs[0].num_new_tokens, 3);
  EXPECT_EQ(Ids(after.token_ids.begin(), after.token_ids.end()), jump);
  ASSERT_TRUE(h.s.resolve({}).ok());
  ASSERT_TRUE(h.s.update(std::vector<SampledToken>{{seq, 800}}).ok());
  EXPECT_EQ(q->num_computed_tokens, 10);
  EXPECT_EQ(q->tokens.back(), 800);
  expect_invariants(h.s);
}

TEST(SchedulerJump, ReplaceInFlightRefusals) {
  Harness h(small_config(16, 4, 64));
  SeqId seq = h.add(1, tokens_from(1, 6), 0, 1, /*max_new_tokens=*/4);
  EXPECT_EQ(code_of(h.s.replace_in_flight(seq, Ids{5})), ErrorCode::kInvalidArgument);  // waiting
  EXPECT_EQ(code_of(h.s.replace_in_flight(999, Ids{5})), ErrorCode::kNotFound);
  h.step();
  // Nothing in flight: replace_last_token's case.
  EXPECT_EQ(code_of(h.s.replace_in_flight(seq, Ids{5})), ErrorCode::kInvalidArgument);
  ScheduleOutput first = h.s.schedule();
  ScheduleOutput ahead = h.s.schedule_ahead(std::vector<SeqId>{seq});
  ASSERT_TRUE(h.s.resolve(std::vector<SampledToken>{{seq, 555}}).ok());
  const Ids before = h.s.sequence(seq)->tokens;
  EXPECT_EQ(code_of(h.s.replace_in_flight(seq, Ids{})), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(h.s.replace_in_flight(seq, Ids{5, -1})), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(h.s.replace_in_flight(seq, Ids{5, 6, 7, 8})),
            ErrorCode::kInvalidArgument);  // 5 outputs > max_new_tokens 4
  EXPECT_EQ(h.s.sequence(seq)->tokens, before);
  EXPECT_TRUE(h.s.replace_in_flight(seq, Ids{5, 6}).ok());
  expect_invariants(h.s);
}

}  // namespace
}  // namespace pagoda
