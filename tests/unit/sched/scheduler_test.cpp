// Scheduler scenarios: validation, budgets and chunking, ordering,
// priorities, the sequence cap, prefix hits, preemption and recompute,
// abort at every phase, the bounded queue.
#include <gtest/gtest.h>

#include "core/log.h"
#include "sched_harness.h"

namespace pagoda {
namespace {

using testing::Harness;
using testing::Ids;
using testing::reference_output;
using testing::small_config;
using testing::tokens_from;

TEST(SchedulerConfig, ValidateNamesTheField) {
  SchedulerConfig c = small_config(4, 4, 8);
  EXPECT_TRUE(c.validate().ok());
  c.max_num_batched_tokens = 0;
  Status st = c.validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("max_num_batched_tokens = 0"), std::string::npos);
  c = small_config(4, 4, 8);
  c.max_model_len = 100;  // 16 slots
  st = c.validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("max_model_len = 100"), std::string::npos);
  EXPECT_FALSE(Scheduler::create(c).ok());
}

TEST(Scheduler, AddRequestValidation) {
  Harness h(small_config(8, 4, 16, 4));  // max_model_len 32
  auto add = [&](RequestId id, int32_t len, int32_t num_seqs = 1, int32_t max_new = 0) {
    RequestSpec spec{.id = id,
                     .prompt_tokens = tokens_from(1, len),
                     .num_seqs = num_seqs,
                     .max_new_tokens = max_new};
    return h.s.add_request(std::move(spec));
  };
  EXPECT_TRUE(add(1, 3).ok());
  auto dup = add(1, 3);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("request 1"), std::string::npos);
  EXPECT_FALSE(add(2, 0).ok());
  auto too_long = add(3, 32);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("max_model_len = 32"), std::string::npos);
  EXPECT_FALSE(add(4, 3, 0).ok());
  EXPECT_FALSE(add(5, 3, 5).ok());  // wider than max_num_seqs
  // 2 x 32 tokens need 16 blocks > 8; bounding the output makes it fit.
  auto big = add(6, 3, 2);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("need 16 KV blocks; the pool has 8"), std::string::npos);
  EXPECT_TRUE(add(7, 3, 2, 13).ok());
  EXPECT_EQ(h.s.stats().num_waiting_requests, 2);
}

TEST(Scheduler, BoundedWaitingQueueRefusesThenAcceptsAgain) {
  SchedulerConfig c = small_config(16, 4, 64);
  c.max_waiting = 2;
  Harness h(c);
  h.add(1, tokens_from(1, 4));
  h.add(2, tokens_from(1, 4));
  auto r = h.s.add_request({.id = 3, .prompt_tokens = tokens_from(1, 4)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  h.step();  // admits both
  EXPECT_TRUE(h.s.add_request({.id = 3, .prompt_tokens = tokens_from(1, 4)}).ok());
}

// One 20-token prompt under budgets 1, 7 and 64: chunk sizes, positions, and
// a sampled row only on the chunk that finishes the prompt.
TEST(Scheduler, ChunkedPrefillFollowsTheBudget) {
  for (int32_t budget : {1, 7, 64}) {
    Harness h(small_config(16, 4, budget));
    Ids prompt = tokens_from(100, 20);
    SeqId seq = h.add(1, prompt);
    std::vector<int32_t> chunks;
    int32_t start = 0;
    while (h.output(seq).empty()) {
      ScheduleOutput out = h.step();
      ASSERT_EQ(out.seqs.size(), 1u);
      EXPECT_EQ(out.seqs[0].start_position, start);
      EXPECT_EQ(out.token_ids,
                Ids(prompt.begin() + start, prompt.begin() + start + out.num_tokens()));
      start += out.num_tokens();
      EXPECT_EQ(out.logits_rows.empty(), start < 20);
      chunks.push_back(out.num_tokens());
    }
    std::vector<int32_t> want;
    for (int32_t left = 20; left > 0; left -= std::min(left, budget))
      want.push_back(std::min(left, budget));
    EXPECT_EQ(chunks, want) << "budget " << budget;
    ScheduleOutput decode = h.step();
    EXPECT_EQ(decode.seqs[0].start_position, 20);
    EXPECT_EQ(decode.token_ids, Ids{h.output(seq)[0]});
    EXPECT_EQ(decode.num_decode_seqs, 1);
  }
}

TEST(Scheduler, MaxChunkTokensCapsEachStep) {
  SchedulerConfig c = small_config(16, 4, 64);
  c.max_chunk_tokens = 8;
  Harness h(c);
  h.add(1, tokens_from(1, 20));
  EXPECT_EQ(h.step().num_tokens(), 8);
  EXPECT_EQ(h.step().num_tokens(), 8);
  ScheduleOutput last = h.step();
  EXPECT_EQ(last.num_tokens(), 4);
  EXPECT_EQ(last.logits_rows.size(), 1u);
}

// Block table and slots of a known layout: block size 4, first sequence
// gets blocks 0..2, the second block 3.
TEST(Scheduler, ExactSlotsAndBlockTables) {
  Harness h(small_config(16, 4, 64));
  h.add(1, tokens_from(1, 10));
  h.add(2, tokens_from(50, 3));
  ScheduleOutput out = h.step();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.query_start_loc, (Ids{0, 10, 13}));
  EXPECT_EQ(out.seq_lens, (Ids{10, 3}));
  EXPECT_EQ(out.max_blocks_per_seq, 3);
  EXPECT_EQ(out.block_tables, (Ids{0, 1, 2, 3, 0, 0}));
  EXPECT_EQ(out.slot_mapping, (Ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14}));
  EXPECT_EQ(out.logits_rows, (Ids{9, 12}));
}

TEST(Scheduler, RunningDecodesFirstThenNewPrefillChunk) {
  Harness h(small_config(32, 4, 10));
  SeqId a = h.add(1, tokens_from(1, 4));
  h.step();  // A prefilled, one token sampled
  SeqId b = h.add(2, tokens_from(200, 30));
  ScheduleOutput out = h.step();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].seq_id, a);
  EXPECT_EQ(out.seqs[0].num_new_tokens, 1);
  EXPECT_EQ(out.seqs[1].seq_id, b);
  EXPECT_EQ(out.seqs[1].num_new_tokens, 9);
  EXPECT_EQ(out.num_decode_seqs, 1);
  EXPECT_EQ(out.seqs[1].logits_index, -1);
  // The running chunked prefill continues next step, after A's decode.
  out = h.step();
  EXPECT_EQ(out.seqs[0].seq_id, a);
  EXPECT_EQ(out.seqs[1].start_position, 9);
  EXPECT_EQ(out.seqs[1].num_new_tokens, 9);
}

TEST(Scheduler, WaitingOrderIsPriorityThenArrival) {
  Harness h(small_config(32, 4, 5));
  SeqId low = h.add(1, tokens_from(1, 5), /*priority=*/1);
  SeqId high_a = h.add(2, tokens_from(10, 5), 0);
  SeqId high_b = h.add(3, tokens_from(20, 5), 0);
  EXPECT_EQ(h.step().seqs[0].seq_id, high_a);
  // high_a decodes (1 token), then high_b gets a 4-token chunk.
  ScheduleOutput out = h.step();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[1].seq_id, high_b);
  EXPECT_EQ(h.s.sequence(low)->num_computed_tokens, 0);
}

TEST(Scheduler, MaxNumSeqsCapsAdmission) {
  Harness h(small_config(32, 4, 64, /*max_seqs=*/2));
  h.add(1, tokens_from(1, 3));
  h.add(2, tokens_from(1, 3));
  SeqId c = h.add(3, tokens_from(1, 3));
  EXPECT_EQ(h.step().seqs.size(), 2u);
  EXPECT_EQ(h.step().seqs.size(), 2u);
  ASSERT_TRUE(h.s.finish_request(1, SeqEndReason::kStop).ok());
  ScheduleOutput out = h.step();
  EXPECT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[1].seq_id, c);
  ASSERT_EQ(out.finished.size(), 1u);
  EXPECT_EQ(out.finished[0].request_id, 1u);
  EXPECT_EQ(out.finished[0].reason, SeqEndReason::kStop);
}

TEST(Scheduler, PrefixHitStartsAfterCachedBlocks) {
  Harness h(small_config(32, 4, 64));
  Ids shared = tokens_from(1, 8);
  Ids p1 = shared;
  p1.push_back(77);
  SeqId a = h.add(1, p1);
  h.step();
  ASSERT_TRUE(h.s.finish(a, SeqEndReason::kStop).ok());
  Ids p2 = shared;
  p2.insert(p2.end(), {5, 6, 7});
  h.add(2, p2);
  ScheduleOutput out = h.step();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].start_position, 8);
  EXPECT_EQ(out.token_ids, (Ids{5, 6, 7}));
  EXPECT_EQ(Ids(out.block_tables.begin(), out.block_tables.begin() + 2), (Ids{0, 1}));
  KvStats st = h.s.stats().kv;
  EXPECT_EQ(st.num_query_tokens, 9 + 11);
  EXPECT_EQ(st.num_hit_tokens, 8);
}

TEST(Scheduler, RequestCanOptOutOfThePrefixCache) {
  Harness h(small_config(32, 4, 64));
  SeqId a = h.add(1, tokens_from(1, 9));
  h.step();
  ASSERT_TRUE(h.s.finish(a, SeqEndReason::kStop).ok());
  RequestSpec spec{.id = 2, .prompt_tokens = tokens_from(1, 9), .use_prefix_cache = false};
  ASSERT_TRUE(h.s.add_request(std::move(spec)).ok());
  EXPECT_EQ(h.step().seqs[0].start_position, 0);
}

// Tiny pool: three requests grow until blocks run out; the victim is the
// lowest priority (largest value), then the latest arrival. Every request
// still ends with exactly the output it produces alone.
TEST(Scheduler, PreemptsLowestPriorityLatestArrivalAndRecomputesExactly) {
  SchedulerConfig c = small_config(6, 4, 64);
  c.max_model_len = 24;
  Harness h(c);
  Ids pa = tokens_from(1, 3), pb = tokens_from(20, 3), pc = tokens_from(40, 3);
  SeqId a = h.add(1, pa, /*priority=*/1);
  SeqId b = h.add(2, pb, /*priority=*/0);
  SeqId cc = h.add(3, pc, /*priority=*/1);
  h.step();  // all three prefilled: 3 blocks
  std::vector<RequestId> preempted;
  for (int i = 0; i < 6 && preempted.empty(); ++i) {
    ScheduleOutput out = h.step();
    preempted = out.preempted_request_ids;
  }
  // At 5 tokens each sequence needs a second block: 6 blocks for 3 requests,
  // then the 9th token of the first to grow needs a 7th block.
  ASSERT_EQ(preempted, std::vector<RequestId>{3});
  EXPECT_EQ(h.s.sequence(cc)->num_computed_tokens, 0);
  EXPECT_EQ(h.s.stats().num_preemptions, 1);
  // Run to 16 outputs each, finishing as the engine would.
  std::map<SeqId, Ids> prompts = {{a, pa}, {b, pb}, {cc, pc}};
  std::map<SeqId, Ids> results;
  for (int i = 0; i < 200 && results.size() < 3; ++i) {
    h.step();
    for (auto& [seq, prompt] : prompts) {
      const Sequence* q = h.s.sequence(seq);
      if (q && q->num_output_tokens() == 16) {
        results[seq] = h.output(seq);
        ASSERT_TRUE(h.s.finish(seq, SeqEndReason::kLength).ok());
      }
    }
  }
  ASSERT_EQ(results.size(), 3u);
  for (auto& [seq, prompt] : prompts)
    EXPECT_EQ(results[seq], reference_output(prompt, 16)) << "seq " << seq;
  EXPECT_GE(h.s.stats().num_preemptions, 1);
  EXPECT_EQ(h.s.stats().kv.num_used_blocks, 0);
}

TEST(Scheduler, RecomputeAfterPreemptionFeedsPromptAndOutputs) {
  SchedulerConfig c = small_config(4, 4, 64);
  c.max_model_len = 16;
  Harness h(c);
  SeqId a = h.add(1, tokens_from(1, 6));
  SeqId b = h.add(2, tokens_from(30, 6));
  h.step();                       // prefill, 2 blocks each (pool full): 7 tokens each
  h.step();                       // position 6: 8 tokens each
  ScheduleOutput out = h.step();  // position 7 fills block 1: 9 tokens each
  out = h.step();                 // position 8 needs a third block: B is preempted
  ASSERT_EQ(out.preempted_request_ids, std::vector<RequestId>{2});
  ASSERT_EQ(out.preempted_seq_ids, std::vector<SeqId>{b});
  ASSERT_TRUE(h.s.finish(a, SeqEndReason::kStop).ok());
  out = h.s.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  const Sequence* q = h.s.sequence(b);
  // B's whole history (6 prompt + 3 outputs) comes back. Its block 0 is
  // still cached; its tail block 1 was evicted first when A grew.
  EXPECT_EQ(q->num_tokens(), 9);
  EXPECT_EQ(out.seqs[0].start_position, 4);
  EXPECT_EQ(out.token_ids, Ids(q->tokens.begin() + 4, q->tokens.end()));
  EXPECT_EQ(out.logits_rows.size(), 1u);
  ASSERT_TRUE(h.s.update({}).ok());
}

// abort() in every state frees everything at once.
TEST(Scheduler, AbortAtEveryPhase) {
  Harness h(small_config(16, 4, 6));
  h.add(1, tokens_from(1, 20));    // will be mid-prefill
  h.add(2, tokens_from(50, 4));    // waiting
  h.step();                        // request 1: first chunk of 6
  EXPECT_TRUE(h.s.abort(2).ok());  // waiting
  EXPECT_TRUE(h.s.check_invariants().ok());
  EXPECT_TRUE(h.s.abort(1).ok());  // running, mid-prefill
  EXPECT_TRUE(h.s.check_invariants().ok());
  EXPECT_EQ(h.s.stats().kv.num_used_blocks, 0);
  EXPECT_EQ(h.s.abort(1).error().code, ErrorCode::kNotFound);

  // In flight: between schedule() and update().
  SeqId c = h.add(3, tokens_from(80, 4));
  ScheduleOutput out = h.s.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_TRUE(h.s.abort(3).ok());
  std::vector<SampledToken> late = {{c, 5}};
  EXPECT_TRUE(h.s.update(late).ok());  // the aborted sequence is skipped
  EXPECT_TRUE(h.s.check_invariants().ok());
  out = h.s.schedule();
  EXPECT_TRUE(out.empty());
  std::vector<RequestId> aborted;
  for (const FinishedSeq& f : out.finished) {
    EXPECT_EQ(f.reason, SeqEndReason::kAbort);
    aborted.push_back(f.request_id);
  }
  EXPECT_EQ(aborted, std::vector<RequestId>{3});
  EXPECT_TRUE(h.s.update({}).ok());
  EXPECT_FALSE(h.s.has_unfinished());
  EXPECT_EQ(h.s.stats().kv.num_used_blocks, 0);
}

TEST(Scheduler, ScheduleTwiceWithoutUpdatePlansNothing) {
  Harness h(small_config(16, 4, 64));
  SeqId a = h.add(1, tokens_from(1, 5));
  ScheduleOutput first = h.s.schedule();
  ASSERT_EQ(first.seqs.size(), 1u);
  set_log_level(LogLevel::kOff);
  EXPECT_TRUE(h.s.schedule().empty());
  set_log_level(LogLevel::kInfo);
  std::vector<SampledToken> tok = {{a, 9}};
  ASSERT_TRUE(h.s.update(tok).ok());  // commits the first step once
  EXPECT_EQ(h.s.sequence(a)->num_computed_tokens, 5);
  EXPECT_TRUE(h.s.check_invariants().ok());
}

TEST(Scheduler, UpdateRejectsTokenForSequenceThatDidNotSample) {
  Harness h(small_config(16, 4, 4));
  SeqId a = h.add(1, tokens_from(1, 10));
  ScheduleOutput out = h.s.schedule();
  EXPECT_TRUE(out.logits_rows.empty());
  std::vector<SampledToken> bad = {{a, 7}};
  Status st = h.s.update(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("sequence 0"), std::string::npos);
  EXPECT_EQ(h.s.sequence(a)->num_computed_tokens, 4);  // the step itself was committed
}

// Recycled outputs (Scheduler::recycle) are refilled exactly like fresh
// ones: a scheduler whose every step reuses the previous steps' buffers
// plans the same steps as one that allocates, through chunked prefill,
// preemption, recompute and finished sequences.
TEST(Scheduler, RecycledOutputsMatchFreshOnes) {
  SchedulerConfig c = small_config(6, 4, 5);
  c.max_model_len = 24;
  Harness fresh(c);
  Harness reused(c);
  std::vector<SeqId> seqs;
  for (Harness* h : {&fresh, &reused}) {
    seqs = {h->add(1, tokens_from(1, 7), /*priority=*/1), h->add(2, tokens_from(20, 3), /*priority=*/0),
            h->add(3, tokens_from(40, 9), /*priority=*/1)};
  }
  int64_t preemptions = 0;
  for (int step = 0; step < 40 && fresh.s.has_unfinished(); ++step) {
    ScheduleOutput a = fresh.step();
    ScheduleOutput b = reused.step();
    EXPECT_EQ(a.token_ids, b.token_ids) << step;
    EXPECT_EQ(a.positions, b.positions) << step;
    EXPECT_EQ(a.slot_mapping, b.slot_mapping) << step;
    EXPECT_EQ(a.query_start_loc, b.query_start_loc) << step;
    EXPECT_EQ(a.seq_lens, b.seq_lens) << step;
    EXPECT_EQ(a.block_tables, b.block_tables) << step;
    EXPECT_EQ(a.max_blocks_per_seq, b.max_blocks_per_seq) << step;
    EXPECT_EQ(a.logits_rows, b.logits_rows) << step;
    EXPECT_EQ(a.copy_src, b.copy_src) << step;
    EXPECT_EQ(a.copy_dst, b.copy_dst) << step;
    EXPECT_EQ(a.num_decode_seqs, b.num_decode_seqs) << step;
    EXPECT_EQ(a.preempted_request_ids, b.preempted_request_ids) << step;
    EXPECT_EQ(a.preempted_seq_ids, b.preempted_seq_ids) << step;
    ASSERT_EQ(a.seqs.size(), b.seqs.size()) << step;
    for (size_t i = 0; i < a.seqs.size(); ++i) {
      EXPECT_EQ(a.seqs[i].seq_id, b.seqs[i].seq_id) << step;
      EXPECT_EQ(a.seqs[i].start_position, b.seqs[i].start_position) << step;
      EXPECT_EQ(a.seqs[i].logits_index, b.seqs[i].logits_index) << step;
    }
    ASSERT_EQ(a.finished.size(), b.finished.size()) << step;
    EXPECT_TRUE(b.sampling.rows.empty() && b.pending_rows.empty()) << step;
    preemptions += static_cast<int64_t>(a.preempted_request_ids.size());
    // The engine fills a batch's sampling rows and pending tokens before
    // handing it back; the next refill must not see them.
    b.sampling.rows.resize(3);
    b.pending_rows = {0};
    reused.s.recycle(std::move(b));
    // Sequences end after 8 outputs, as the engine would finish them.
    for (Harness* h : {&fresh, &reused}) {
      for (SeqId id : seqs) {
        const Sequence* q = h->s.sequence(id);
        if (q != nullptr && q->num_output_tokens() >= 8) (void)h->s.finish(id, SeqEndReason::kLength);
      }
    }
  }
  EXPECT_FALSE(fresh.s.has_unfinished());
  EXPECT_GT(preemptions, 0);
}

}  // namespace
}  // namespace pagoda
