// Request groups: parallel samples and beams forked from one prefilled
// prompt, copy-on-write, lockstep co-scheduling, group preemption.
#include <gtest/gtest.h>

#include "sched_harness.h"

namespace pagoda {
namespace {

using testing::fake_next_token;
using testing::Harness;
using testing::Ids;
using testing::small_config;
using testing::tokens_from;

std::vector<Branch> same_parent(SeqId parent, const Ids& tokens) {
  std::vector<Branch> b;
  for (int32_t t : tokens) b.push_back({parent, t});
  return b;
}

TEST(SchedulerGroup, ParallelSamplesShareThePromptAndCopyOnWrite) {
  Harness h(small_config(16, 4, 64));
  SeqId p = h.add(1, tokens_from(1, 6), 0, /*num_seqs=*/3, /*max_new_tokens=*/8);
  ScheduleOutput out = h.step(/*hold=*/{1});  // prefill; the engine samples 3 tokens from its row
  ASSERT_EQ(out.logits_rows.size(), 1u);
  auto seqs = h.s.branch(1, same_parent(p, {501, 502, 503}));
  ASSERT_TRUE(seqs.ok()) << seqs.error().message;
  ASSERT_EQ(seqs->size(), 3u);
  EXPECT_EQ((*seqs)[0], p);
  for (size_t i = 0; i < 3; ++i) {
    const Sequence* q = h.s.sequence((*seqs)[i]);
    EXPECT_EQ(q->num_computed_tokens, 6);
    EXPECT_EQ(q->tokens.back(), 501 + static_cast<int32_t>(i));
  }
  EXPECT_EQ(h.s.kv().ref_count(0), 3);
  EXPECT_EQ(h.s.kv().ref_count(1), 3);
  // All three decode position 6 into the shared partial block 1: the first
  // two get private copies, the last writes block 1 in place.
  out = h.step();
  ASSERT_EQ(out.seqs.size(), 3u);
  EXPECT_EQ(out.copy_src, (Ids{1, 1}));
  EXPECT_EQ(out.copy_dst, (Ids{2, 3}));
  EXPECT_EQ(out.block_tables, (Ids{0, 2, 0, 3, 0, 1}));
  EXPECT_EQ(out.logits_rows, (Ids{0, 1, 2}));
  EXPECT_EQ(h.s.kv().ref_count(0), 3);
  // The group keeps sampling together.
  EXPECT_EQ(h.step().seqs.size(), 3u);
  ASSERT_TRUE(h.s.finish((*seqs)[1], SeqEndReason::kStop).ok());
  out = h.step();
  EXPECT_EQ(out.seqs.size(), 2u);
  ASSERT_EQ(out.finished.size(), 1u);
  EXPECT_EQ(out.finished[0].seq_id, (*seqs)[1]);
  ASSERT_TRUE(h.s.finish_request(1, SeqEndReason::kLength).ok());
  EXPECT_EQ(h.s.stats().kv.num_used_blocks, 0);
  EXPECT_TRUE(h.s.check_invariants().ok());
}

TEST(SchedulerGroup, BranchDropsUnchosenBeamsAndForksBeforeAppending) {
  Harness h(small_config(16, 4, 64));
  SeqId p = h.add(1, tokens_from(1, 3), 0, /*num_seqs=*/2, /*max_new_tokens=*/8);
  h.step({1});
  auto beams = h.s.branch(1, same_parent(p, {10, 11}));
  ASSERT_TRUE(beams.ok());
  SeqId b0 = (*beams)[0], b1 = (*beams)[1];
  h.step({1});
  // Both new beams continue from b1: b0 is dropped, b1 extended and forked.
  std::vector<Branch> next = {{b1, 20}, {b1, 21}};
  auto kept = h.s.branch(1, next);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ((*kept)[0], b1);
  EXPECT_EQ(h.s.sequence(b0), nullptr);
  Ids want = {1, 2, 3, 11, 20};
  EXPECT_EQ(h.s.sequence((*kept)[0])->tokens, want);
  want.back() = 21;
  EXPECT_EQ(h.s.sequence((*kept)[1])->tokens, want);
  ScheduleOutput out = h.step({1});
  ASSERT_EQ(out.finished.size(), 1u);
  EXPECT_EQ(out.finished[0].seq_id, b0);
  EXPECT_EQ(out.finished[0].reason, SeqEndReason::kDropped);
  EXPECT_TRUE(h.s.check_invariants().ok());
}

TEST(SchedulerGroup, ForkAndBranchPreconditions) {
  Harness h(small_config(16, 4, 64));
  SeqId p = h.add(1, tokens_from(1, 3), 0, /*num_seqs=*/2, /*max_new_tokens=*/8);
  h.step({1});
  ASSERT_TRUE(h.s.fork(p).ok());
  auto third = h.s.fork(p);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.error().message.find("num_seqs = 2"), std::string::npos);
  ScheduleOutput out = h.s.schedule();  // nothing to compute: neither beam has a new token
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(h.s.update({}).ok());
  std::vector<Branch> too_many = {{p, 1}, {p, 2}, {p, 3}};
  EXPECT_FALSE(h.s.branch(1, too_many).ok());
  std::vector<Branch> foreign = {{12345, 1}};
  EXPECT_FALSE(h.s.branch(1, foreign).ok());
  h.add(2, tokens_from(1, 3));
  out = h.s.schedule();
  EXPECT_FALSE(h.s.fork(p).ok());  // a step is in flight
  ASSERT_TRUE(h.s.update({}).ok());
}

// abort() of a forked group, and of a group sent back to waiting by
// preemption, frees every sequence at once.
TEST(SchedulerGroup, AbortForkedAndPreemptedGroups) {
  SchedulerConfig c = small_config(6, 4, 64);
  c.max_model_len = 12;
  Harness h(c);
  SeqId p = h.add(1, tokens_from(1, 5), 1, /*num_seqs=*/2, /*max_new_tokens=*/7);
  h.step({1});
  ASSERT_TRUE(h.s.branch(1, same_parent(p, {100, 200})).ok());
  h.step();
  ASSERT_TRUE(h.s.abort(1).ok());  // running, forked
  ScheduleOutput out = h.step();
  EXPECT_EQ(out.finished.size(), 2u);
  EXPECT_EQ(h.s.stats().kv.num_used_blocks, 0);

  p = h.add(2, tokens_from(1, 5), 1, /*num_seqs=*/2, /*max_new_tokens=*/7);
  h.step({2});
  ASSERT_TRUE(h.s.branch(2, same_parent(p, {100, 200})).ok());
  h.step();
  h.add(3, tokens_from(50, 11), /*priority=*/0);
  bool preempted = false;
  for (int i = 0; i < 4 && !preempted; ++i) preempted = !h.step({3}).preempted_request_ids.empty();
  ASSERT_TRUE(preempted);
  ASSERT_FALSE(h.s.request(2)->running);
  ASSERT_TRUE(h.s.abort(2).ok());  // waiting after preemption
  EXPECT_TRUE(h.s.check_invariants().ok());
  ASSERT_TRUE(h.s.abort(3).ok());
  EXPECT_FALSE(h.s.has_unfinished());
  EXPECT_EQ(h.s.stats().kv.num_used_blocks, 0);
}

// A group of three decodes only when all three fit the budget: while a
// decode at the front of the queue takes one of three tokens, it waits.
TEST(SchedulerGroup, GroupIsScheduledAllOrNothing) {
  Harness h(small_config(32, 4, 3));
  SeqId x = h.add(1, tokens_from(1, 3));
  h.step();
  SeqId p = h.add(2, tokens_from(40, 2), 0, /*num_seqs=*/3, /*max_new_tokens=*/8);
  h.step({2});  // X decodes, the group's prompt prefills
  ASSERT_TRUE(h.s.branch(2, same_parent(p, {7, 8, 9})).ok());
  for (int i = 0; i < 3; ++i) {
    ScheduleOutput out = h.step();
    ASSERT_EQ(out.seqs.size(), 1u);
    EXPECT_EQ(out.seqs[0].seq_id, x);
  }
  ASSERT_TRUE(h.s.finish(x, SeqEndReason::kStop).ok());
  ScheduleOutput out = h.step({2});
  EXPECT_EQ(out.seqs.size(), 3u);
  EXPECT_EQ(out.logits_rows.size(), 3u);
}

// A higher-priority request exhausts the pool; the whole beam group is
// preempted, readmitted later and recomputed; it samples again only when
// every beam has recomputed its whole history.
TEST(SchedulerGroup, GroupIsPreemptedAndRecomputedTogether) {
  SchedulerConfig c = small_config(6, 4, 64);
  c.max_model_len = 12;
  Harness h(c);
  SeqId p = h.add(1, tokens_from(1, 5), /*priority=*/1, /*num_seqs=*/2, /*max_new_tokens=*/8);
  h.step({1});
  auto beams = h.s.branch(1, same_parent(p, {100, 200}));
  ASSERT_TRUE(beams.ok());
  // 2 shared + 1 private copy: 3 blocks. The urgent request needs 3 more and then a 4th.
  h.step();
  SeqId u = h.add(2, tokens_from(50, 11), /*priority=*/0);
  std::vector<SeqId> preempted;
  for (int i = 0; i < 4 && preempted.empty(); ++i) preempted = h.step({2}).preempted_seq_ids;
  EXPECT_EQ(preempted, *beams);
  for (SeqId b : *beams) EXPECT_EQ(h.s.sequence(b)->num_computed_tokens, 0);
  Ids before0 = h.s.sequence((*beams)[0])->tokens, before1 = h.s.sequence((*beams)[1])->tokens;
  ASSERT_TRUE(h.s.finish(u, SeqEndReason::kStop).ok());
  ScheduleOutput out = h.step();
  ASSERT_EQ(out.seqs.size(), 2u);  // readmitted together, both recompute to the end
  EXPECT_EQ(out.logits_rows.size(), 2u);
  Ids after0 = h.s.sequence((*beams)[0])->tokens;
  Ids after1 = h.s.sequence((*beams)[1])->tokens;
  EXPECT_EQ(Ids(after0.begin(), after0.end() - 1), before0);
  EXPECT_EQ(Ids(after1.begin(), after1.end() - 1), before1);
  EXPECT_EQ(after0.back(), fake_next_token(before0));
  EXPECT_EQ(after1.back(), fake_next_token(before1));
}

// The same preemption without the prefix cache and with a budget of 10:
// recomputing 2 x 9 tokens takes two steps, and only the second samples,
// for both beams at once.
TEST(SchedulerGroup, RecomputingGroupSamplesInLockstep) {
  SchedulerConfig c = small_config(6, 4, 10);
  c.max_model_len = 12;
  c.kv.enable_prefix_caching = false;
  Harness h(c);
  SeqId p = h.add(1, tokens_from(1, 5), /*priority=*/1, /*num_seqs=*/2, /*max_new_tokens=*/8);
  h.step({1});
  auto beams = h.s.branch(1, same_parent(p, {100, 200}));
  ASSERT_TRUE(beams.ok());
  h.step();
  SeqId u = h.add(2, tokens_from(50, 11), /*priority=*/0);
  std::vector<SeqId> preempted;
  for (int i = 0; i < 4 && preempted.empty(); ++i) preempted = h.step({2}).preempted_seq_ids;
  ASSERT_EQ(preempted, *beams);
  ASSERT_TRUE(h.s.finish(u, SeqEndReason::kStop).ok());
  ScheduleOutput out = h.step();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].num_new_tokens, 8);
  EXPECT_EQ(out.seqs[1].num_new_tokens, 2);
  EXPECT_TRUE(out.logits_rows.empty());
  out = h.step();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].seq_id, (*beams)[0]);
  EXPECT_EQ(out.seqs[0].num_new_tokens, 1);
  EXPECT_EQ(out.seqs[1].num_new_tokens, 7);
  EXPECT_EQ(out.logits_rows.size(), 2u);
}

}  // namespace
}  // namespace pagoda
