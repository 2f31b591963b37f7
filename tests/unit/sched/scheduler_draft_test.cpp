// Speculative decoding in the scheduler (set_draft / verify_draft): drafts
// run with the last token in one step that samples after each, the kept
// prefix becomes computed tokens and the rest is dropped with its blocks,
// the prefix cache never holds a draft, drafts never preempt anyone nor
// split a step, and -- the property that matters -- any drafts leave every
// output exactly what plain decoding gives, also under preemption.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "sched_harness.h"

namespace pagoda {
namespace {

using testing::expect_invariants;
using testing::Harness;
using testing::Ids;
using testing::reference_output;
using testing::small_config;
using testing::tokens_from;

// One engine step with the fake model and verification: every sampled row
// draws fake_next_token of its prefix; a drafted sequence keeps its drafts
// while they equal those samples, then takes the sample after the last kept
// one. Returns the step's output; accepted[seq] = drafts kept.
ScheduleOutput spec_step(Harness& h, std::map<SeqId, int32_t>* accepted = nullptr) {
  ScheduleOutput out = h.s.schedule();
  testing::expect_consistent(h.s, out);
  std::vector<SampledToken> sampled;
  struct Verify {
    SeqId seq;
    int32_t kept;
    int32_t next;
  };
  std::vector<Verify> verifies;
  for (const ScheduledSeq& e : out.seqs) {
    if (e.logits_index < 0) continue;
    const Sequence* seq = h.s.sequence(e.seq_id);
    const int32_t k = e.num_draft_tokens;
    if (k == 0) {
      sampled.push_back({e.seq_id, testing::fake_next_token(seq->tokens)});
      continue;
    }
    const int32_t base = seq->num_tokens() - k;  // tokens before the drafts
    int32_t kept = 0;
    int32_t next = 0;
    for (int32_t j = 0; j <= k; ++j) {
      next = testing::fake_next_token(std::span<const int32_t>(seq->tokens.data(), base + j));
      if (j == k || next != seq->tokens[base + j]) break;
      ++kept;
    }
    verifies.push_back({e.seq_id, kept, next});
  }
  Status st = h.s.update(sampled);
  EXPECT_TRUE(st.ok()) << st.error().message;
  for (const Verify& v : verifies) {
    st = h.s.verify_draft(v.seq, v.kept);
    EXPECT_TRUE(st.ok()) << st.error().message;
    st = h.s.append_token(v.seq, v.next);
    EXPECT_TRUE(st.ok()) << st.error().message;
    if (accepted) (*accepted)[v.seq] = v.kept;
  }
  expect_invariants(h.s);
  return out;
}

TEST(SchedulerDraft, DraftsRunWithTheLastTokenAndKeepTheMatchingPrefix) {
  Harness h(small_config(16, 4, 64));
  const Ids prompt = tokens_from(1, 6);
  SeqId seq = h.add(1, prompt);
  spec_step(h);  // prefill; samples x at position 6
  const Ids ref = reference_output(prompt, 8);
  // Two right drafts, then a wrong one.
  const Ids draft = {ref[1], ref[2], 7};
  ASSERT_EQ(h.s.set_draft(seq, draft).value(), 3);
  expect_invariants(h.s);
  std::map<SeqId, int32_t> accepted;
  ScheduleOutput out = spec_step(h, &accepted);
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].start_position, 6);
  EXPECT_EQ(out.seqs[0].num_new_tokens, 4);
  EXPECT_EQ(out.seqs[0].num_draft_tokens, 3);
  EXPECT_EQ(Ids(out.logits_rows.begin(), out.logits_rows.end()), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(accepted[seq], 2);
  // x, the two kept drafts and the sample after them; 9 computed.
  EXPECT_EQ(h.output(seq), Ids(ref.begin(), ref.begin() + 4));
  const Sequence* q = h.s.sequence(seq);
  EXPECT_EQ(q->num_computed_tokens, 9);
  EXPECT_EQ(q->num_draft_tokens, 0);
  // Slots 0..9 were written (blocks 0..2); 9 computed need blocks 0..2.
  EXPECT_EQ(h.s.kv().block_table(seq).size(), 3u);
}

TEST(SchedulerDraft, AllDraftsAcceptedGiveTheBonusToken) {
  Harness h(small_config(16, 4, 64));
  const Ids prompt = tokens_from(1, 6);
  SeqId seq = h.add(1, prompt);
  spec_step(h);
  const Ids ref = reference_output(prompt, 8);
  ASSERT_EQ(h.s.set_draft(seq, Ids(ref.begin() + 1, ref.begin() + 5)).value(), 4);
  std::map<SeqId, int32_t> accepted;
  spec_step(h, &accepted);
  EXPECT_EQ(accepted[seq], 4);
  EXPECT_EQ(h.output(seq), Ids(ref.begin(), ref.begin() + 6));
  EXPECT_EQ(h.s.sequence(seq)->num_computed_tokens, 11);
}

TEST(SchedulerDraft, RejectedDraftsReleaseTheirBlocks) {
  Harness h(small_config(16, 4, 64));
  SeqId seq = h.add(1, tokens_from(1, 6));
  spec_step(h);
  ASSERT_EQ(h.s.set_draft(seq, Ids{-5 + 10, 6, 7, 8, 9, 10, 11, 12}).value(), 8);
  const int32_t before = h.s.kv().num_allocatable_blocks();
  std::map<SeqId, int32_t> accepted;
  spec_step(h, &accepted);
  ASSERT_EQ(accepted[seq], 0);
  // 7 computed need 2 blocks, as without drafts; the draft slots' blocks
  // 2..3 are free again.
  EXPECT_EQ(h.s.kv().block_table(seq).size(), 2u);
  EXPECT_EQ(h.s.kv().num_allocatable_blocks(), before);
}

// A draft block full of computed but rejected tokens never enters the
// prefix cache; accepted ones do.
TEST(SchedulerDraft, PrefixCacheHoldsOnlyVerifiedTokens) {
  Harness h(small_config(32, 4, 64));
  const Ids prompt = tokens_from(1, 6);
  SeqId seq = h.add(1, prompt);
  spec_step(h);
  const Ids ref = reference_output(prompt, 8);
  // Positions 7..9 hold drafts w1 w2 w3: block 1 (4..7) would be full with w1.
  ASSERT_TRUE(h.s.set_draft(seq, Ids{900, 901, 902}).ok());
  spec_step(h);
  Ids with_draft = prompt;
  with_draft.insert(with_draft.end(), {ref[0], 900, 1, 2, 3});
  EXPECT_EQ(h.s.kv().find_prefix(with_draft, {}).num_tokens, 4);
  // The verified token at position 7 fills block 1 after the next step.
  spec_step(h);
  Ids verified = prompt;
  verified.insert(verified.end(), {ref[0], ref[1], 1, 2, 3});
  EXPECT_EQ(h.s.kv().find_prefix(verified, {}).num_tokens, 8);
  (void)seq;
}

TEST(SchedulerDraft, DraftsFitTheBudgetAndTheChunkCapAndNeverPreempt) {
  {
    // Budget 3: one token and two of the four drafts.
    Harness h(small_config(32, 4, 3));
    SeqId a = h.add(1, tokens_from(1, 3));
    spec_step(h);
    ASSERT_EQ(h.s.set_draft(a, Ids{1, 2, 3, 4}).value(), 4);
    ScheduleOutput out = spec_step(h);
    ASSERT_EQ(out.seqs.size(), 1u);
    EXPECT_EQ(out.seqs[0].num_new_tokens, 3);
    EXPECT_EQ(out.seqs[0].num_draft_tokens, 2);
  }
  {
    SchedulerConfig c = small_config(32, 4, 64);
    c.max_chunk_tokens = 3;
    Harness h(c);
    SeqId a = h.add(1, tokens_from(1, 3));
    spec_step(h);
    ASSERT_EQ(h.s.set_draft(a, Ids{1, 2, 3, 4}).value(), 4);
    ScheduleOutput out = spec_step(h);
    ASSERT_EQ(out.seqs.size(), 1u);
    EXPECT_EQ(out.seqs[0].num_new_tokens, 3);
    EXPECT_EQ(out.seqs[0].num_draft_tokens, 2);
  }
  {
    // 4 blocks: b holds 2, a holds 1 and its 1 + 7 drafts would need 2 more.
    Harness h(small_config(4, 4, 64));
    SeqId a = h.add(1, tokens_from(1, 3));
    SeqId b = h.add(2, tokens_from(1, 7));
    spec_step(h);
    ASSERT_EQ(h.s.kv().num_allocatable_blocks(), 1);
    ASSERT_EQ(h.s.set_draft(a, Ids{1, 2, 3, 4, 5, 6, 7}).value(), 7);
    ScheduleOutput out = spec_step(h);
    EXPECT_TRUE(out.preempted_request_ids.empty());
    for (const ScheduledSeq& e : out.seqs) EXPECT_EQ(e.num_draft_tokens, 0);
    EXPECT_NE(h.s.sequence(b), nullptr);
  }
}

TEST(SchedulerDraft, UnscheduledDraftsAreDropped) {
  Harness h(small_config(32, 4, 8));
  SeqId a = h.add(1, tokens_from(1, 3));
  spec_step(h);
  // A higher-priority long prompt: admitted after a's decode, then planned
  // first, its chunks take the whole budget and a waits.
  h.add(2, tokens_from(1, 30), /*priority=*/-1);
  spec_step(h);
  ASSERT_EQ(h.s.set_draft(a, Ids{1, 2}).value(), 2);
  ScheduleOutput out = spec_step(h);
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_NE(out.seqs[0].seq_id, a);
  EXPECT_EQ(h.s.sequence(a)->num_draft_tokens, 0);
  EXPECT_EQ(h.s.sequence(a)->num_uncomputed(), 1);
  // Drafts again once it runs.
  EXPECT_EQ(h.s.set_draft(a, Ids{1, 2}).value(), 2);
}

TEST(SchedulerDraft, SetDraftClampsAndRefuses) {
  SchedulerConfig c = small_config(16, 4, 64);
  c.max_model_len = 24;
  Harness h(c);
  SeqId seq = h.add(1, tokens_from(1, 6), 0, 1, /*max_new_tokens=*/4);
  SeqId near_end = h.add(2, tokens_from(1, 22));
  auto code = [&](SeqId s, const Ids& t) {
    Result<int32_t> r = h.s.set_draft(s, t);
    return r.ok() ? ErrorCode::kInternal : r.error().code;
  };
  EXPECT_EQ(code(seq, {5}), ErrorCode::kInvalidArgument);  // nothing sampled yet
  EXPECT_EQ(code(99, {5}), ErrorCode::kNotFound);
  spec_step(h);
  EXPECT_EQ(code(seq, {-1}), ErrorCode::kInvalidArgument);
  // One output so far, max_new_tokens 4: at most 2 drafts (+ the sample after).
  EXPECT_EQ(h.s.set_draft(seq, Ids{1, 2, 3, 4}).value(), 2);
  EXPECT_EQ(code(seq, {5}), ErrorCode::kInvalidArgument);  // has drafts
  // 23 tokens of 24: no room for a draft besides the next sample.
  EXPECT_EQ(h.s.set_draft(near_end, Ids{1, 2}).value(), 0);
  expect_invariants(h.s);
  ScheduleOutput out = h.s.schedule();
  EXPECT_EQ(code(seq, {5}), ErrorCode::kInvalidArgument);  // a step is in flight
  EXPECT_EQ(h.s.verify_draft(seq, 1).error().code, ErrorCode::kInvalidArgument);
  (void)out;
}

TEST(SchedulerDraft, FinishedSequencesReportTheirTokens) {
  Harness h(small_config(16, 4, 64));
  const Ids prompt = tokens_from(1, 5);
  SeqId seq = h.add(1, prompt);
  spec_step(h);
  ASSERT_TRUE(h.s.set_draft(seq, Ids{3, 4}).ok());
  ASSERT_TRUE(h.s.finish(seq, SeqEndReason::kStop).ok());
  ScheduleOutput out = h.s.schedule();
  ASSERT_EQ(out.finished.size(), 1u);
  EXPECT_EQ(out.finished[0].num_prompt_tokens, 5);
  Ids expected = prompt;
  expected.push_back(reference_output(prompt, 1)[0]);
  EXPECT_EQ(out.finished[0].tokens, expected);  // drafts dropped
}

// Any drafts, right or wrong, of any length, under a pool small enough to
// preempt: every output equals plain decoding.
TEST(SchedulerDraft, OutputsEqualPlainDecodingUnderRandomDraftsAndPreemption) {
  std::mt19937 rng(7);
  int64_t total_preemptions = 0;
  for (int trial = 0; trial < 20; ++trial) {
    SchedulerConfig c = small_config(14, 4, 12 + trial % 5);
    c.max_chunk_tokens = trial % 3 == 0 ? 5 : 0;
    Harness h(c);
    std::map<SeqId, Ids> prompts;
    std::map<SeqId, int32_t> max_new;
    for (int r = 0; r < 4; ++r) {
      Ids prompt = tokens_from(1 + r * 7, 3 + r * 2 + trial % 4);
      const int32_t n = 6 + (r + trial) % 9;
      SeqId id = h.add(static_cast<RequestId>(r + 1), prompt, 0, 1, n);
      prompts[id] = prompt;
      max_new[id] = n;
    }
    std::vector<FinishedSeq> finished;
    for (int step = 0; step < 400 && h.s.has_unfinished(); ++step) {
      for (const auto& [id, prompt] : prompts) {
        const Sequence* q = h.s.sequence(id);
        if (q == nullptr || q->num_uncomputed() != 1 || q->num_output_tokens() < 1) continue;
        if (!h.s.request(q->request_id)->running || rng() % 3 == 0) continue;
        // Drafts: a prefix of the true continuation, then noise.
        const Ids truth = reference_output(q->tokens, 8);
        Ids draft;
        const int32_t len = 1 + static_cast<int32_t>(rng() % 6);
        const int32_t right = static_cast<int32_t>(rng() % (len + 1));
        for (int32_t j = 0; j < len; ++j) draft.push_back(j < right ? truth[j] : 5000 + j);
        ASSERT_TRUE(h.s.set_draft(id, draft).ok());
      }
      ScheduleOutput out = spec_step(h);
      total_preemptions += static_cast<int64_t>(out.preempted_request_ids.size());
      for (FinishedSeq& f : out.finished) finished.push_back(std::move(f));
      for (const auto& [id, n] : max_new) {
        const Sequence* q = h.s.sequence(id);
        if (q != nullptr && q->num_output_tokens() >= n) {
          ASSERT_TRUE(h.s.finish(id, SeqEndReason::kLength).ok());
        }
      }
    }
    ScheduleOutput last = h.s.schedule();
    for (FinishedSeq& f : last.finished) finished.push_back(std::move(f));
    ASSERT_EQ(finished.size(), prompts.size());
    for (const FinishedSeq& f : finished) {
      const Ids& prompt = prompts.at(f.seq_id);
      Ids out(f.tokens.begin() + f.num_prompt_tokens, f.tokens.end());
      EXPECT_EQ(out, reference_output(prompt, static_cast<int32_t>(out.size())));
      EXPECT_EQ(static_cast<int32_t>(out.size()), max_new.at(f.seq_id));
    }
  }
  EXPECT_GT(total_preemptions, 0);  // the pool was small enough to preempt
}

// Async scheduling past verification steps: schedule_ahead() plans the
// step after one that verifies drafts as if every draft were rejected, and
// resolve_verified() corrects the sequences that kept some (their in-flight
// work voided, the kept drafts computed). Steps leave the pipeline at
// random to take drafts (set_draft needs no step in flight). Outputs equal
// plain decoding, under preemption, whatever is accepted.
TEST(SchedulerDraft, VerificationPlannedPastGivesPlainDecodingOutputs) {
  std::mt19937 rng(11);
  int64_t corrected = 0, rejected_ahead = 0, total_preemptions = 0;
  for (int trial = 0; trial < 20; ++trial) {
    SchedulerConfig c = small_config(14, 4, 12 + trial % 5);
    c.max_chunk_tokens = trial % 3 == 0 ? 5 : 0;
    Harness h(c);
    std::map<SeqId, Ids> prompts;
    std::map<SeqId, int32_t> max_new;
    for (int r = 0; r < 4; ++r) {
      Ids prompt = tokens_from(1 + r * 7, 3 + r * 2 + trial % 4);
      const int32_t n = 6 + (r + trial) % 9;
      SeqId id = h.add(static_cast<RequestId>(r + 1), prompt, 0, 1, n);
      prompts[id] = prompt;
      max_new[id] = n;
    }
    // What the fake model sees for a step's sampling sequences: their
    // tokens when the step is complete (placeholders resolved) and drafts.
    struct Row {
      SeqId seq;
      Ids tokens;
      int32_t k;
    };
    auto snapshot = [&h](const ScheduleOutput& out, const std::map<SeqId, bool>& dropped) {
      std::vector<Row> rows;
      for (const ScheduledSeq& e : out.seqs) {
        const Sequence* q = h.s.sequence(e.seq_id);
        if (e.logits_index < 0 || q == nullptr || dropped.contains(e.seq_id)) continue;
        rows.push_back({e.seq_id, q->tokens, e.num_draft_tokens});
      }
      return rows;
    };
    auto finish_long = [&] {
      for (const auto& [id, n] : max_new) {
        const Sequence* q = h.s.sequence(id);
        if (q != nullptr && q->num_output_tokens() >= n) {
          ASSERT_TRUE(h.s.finish(id, SeqEndReason::kLength).ok());
        }
      }
    };
    std::vector<FinishedSeq> finished;
    std::vector<Row> running;  // the step in flight's rows
    bool in_flight = false;
    for (int step = 0; step < 400 && h.s.has_unfinished(); ++step) {
      if (!in_flight) {
        for (const auto& [id, prompt] : prompts) {
          const Sequence* q = h.s.sequence(id);
          if (q == nullptr || q->num_uncomputed() != 1 || q->num_output_tokens() < 1) continue;
          if (!h.s.request(q->request_id)->running || rng() % 3 == 0) continue;
          const Ids truth = reference_output(q->tokens, 8);
          Ids draft;
          const int32_t len = 1 + static_cast<int32_t>(rng() % 6);
          const int32_t right = static_cast<int32_t>(rng() % (len + 1));
          for (int32_t j = 0; j < len; ++j) draft.push_back(j < right ? truth[j] : 5000 + j);
          ASSERT_TRUE(h.s.set_draft(id, draft).ok());
        }
        ScheduleOutput out = h.s.schedule();
        total_preemptions += static_cast<int64_t>(out.preempted_request_ids.size());
        for (FinishedSeq& f : out.finished) finished.push_back(std::move(f));
        running = snapshot(out, {});
        in_flight = true;
        continue;
      }
      // The rows of the step in flight: a sample, or a verification.
      std::vector<SampledToken> sampled;
      struct Verify {
        SeqId seq;
        int32_t kept;
        int32_t next;
      };
      std::vector<Verify> verifies;
      for (const Row& r : running) {
        if (r.k == 0) {
          sampled.push_back({r.seq, testing::fake_next_token(r.tokens)});
          continue;
        }
        const int32_t base = static_cast<int32_t>(r.tokens.size()) - r.k;
        int32_t kept = 0, next = 0;
        for (int32_t j = 0; j <= r.k; ++j) {
          next = testing::fake_next_token(std::span<const int32_t>(r.tokens.data(), base + j));
          if (j == r.k || next != r.tokens[static_cast<size_t>(base + j)]) break;
          ++kept;
        }
        verifies.push_back({r.seq, kept, next});
      }
      const bool ahead = rng() % 4 != 0;
      std::map<SeqId, bool> dropped;
      ScheduleOutput next;
      if (ahead) {
        std::vector<SeqId> pending;
        for (const Row& r : running) pending.push_back(r.seq);
        next = h.s.schedule_ahead(pending);
        total_preemptions += static_cast<int64_t>(next.preempted_request_ids.size());
        for (FinishedSeq& f : next.finished) finished.push_back(std::move(f));
        for (const Verify& v : verifies) EXPECT_FALSE(h.s.ahead_drafts(v.seq).empty());
        Status st = h.s.resolve(sampled);
        ASSERT_TRUE(st.ok()) << st.error().message;
        for (const Verify& v : verifies) {
          if (h.s.sequence(v.seq) == nullptr) continue;
          st = h.s.resolve_verified(v.seq, v.kept, v.next);
          ASSERT_TRUE(st.ok()) << st.error().message;
          if (v.kept > 0) {
            dropped[v.seq] = true;  // its row in `next` is void
            ++corrected;
          } else {
            ++rejected_ahead;
          }
        }
      } else {
        Status st = h.s.update(sampled);
        ASSERT_TRUE(st.ok()) << st.error().message;
        for (const Verify& v : verifies) {
          ASSERT_TRUE(h.s.verify_draft(v.seq, v.kept).ok());
          ASSERT_TRUE(h.s.append_token(v.seq, v.next).ok());
        }
      }
      finish_long();
      expect_invariants(h.s);
      if (ahead) {
        running = snapshot(next, dropped);
      } else {
        in_flight = false;
      }
    }
    ASSERT_FALSE(h.s.has_unfinished());
    if (in_flight) ASSERT_TRUE(h.s.update({}).ok());  // the last step, of finished sequences
    ScheduleOutput last = h.s.schedule();
    for (FinishedSeq& f : last.finished) finished.push_back(std::move(f));
    ASSERT_EQ(finished.size(), prompts.size());
    for (const FinishedSeq& f : finished) {
      const Ids& prompt = prompts.at(f.seq_id);
      Ids out(f.tokens.begin() + f.num_prompt_tokens, f.tokens.end());
      EXPECT_EQ(out, reference_output(prompt, static_cast<int32_t>(out.size())));
      EXPECT_EQ(static_cast<int32_t>(out.size()), max_new.at(f.seq_id));
    }
  }
  EXPECT_GT(corrected, 0);
  EXPECT_GT(rejected_ahead, 0);
  EXPECT_GT(total_preemptions, 0);
}

}  // namespace
}  // namespace pagoda
