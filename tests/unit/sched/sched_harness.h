// Test harness: a Scheduler driven by a fake model whose next token is a
// pure function of the sequence's tokens, with every ScheduleOutput checked
// against the scheduler's own sequences and block tables.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <vector>

#include "sched/scheduler.h"

namespace pagoda::testing {

using Ids = std::vector<int32_t>;

inline Ids tokens_from(int32_t first, int32_t n) {
  Ids t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Deterministic "model": the next token depends only on the tokens so far.
inline int32_t fake_next_token(std::span<const int32_t> tokens) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>(h % 1000) + 1000;
}

inline SchedulerConfig small_config(int32_t num_blocks, int32_t block_size, int32_t budget,
                                    int32_t max_seqs = 16) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.max_waiting = 64;
  c.max_model_len = std::min(256, num_blocks * block_size);
  c.kv = {.num_blocks = num_blocks, .block_size = block_size};
  return c;
}

inline void expect_invariants(const Scheduler& s) {
  Status st = s.check_invariants();
  EXPECT_TRUE(st.ok()) << st.error().message;
}

// Checks the flattened model input against the scheduler's state.
inline void expect_consistent(const Scheduler& s, const ScheduleOutput& out) {
  const int32_t bs = s.kv().block_size();
  ASSERT_EQ(out.query_start_loc.size(), out.seqs.size() + 1);
  ASSERT_EQ(out.seq_lens.size(), out.seqs.size());
  ASSERT_EQ(out.block_tables.size(), out.seqs.size() * out.max_blocks_per_seq);
  ASSERT_EQ(out.positions.size(), out.token_ids.size());
  ASSERT_EQ(out.slot_mapping.size(), out.token_ids.size());
  EXPECT_LE(out.num_tokens(), s.config().max_num_batched_tokens);
  EXPECT_LE(static_cast<int32_t>(out.seqs.size()), s.config().max_num_seqs);
  int32_t num_sampling = 0;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& e = out.seqs[i];
    const Sequence* seq = s.sequence(e.seq_id);
    ASSERT_NE(seq, nullptr);
    EXPECT_EQ(e.request_id, seq->request_id);
    EXPECT_EQ(out.query_start_loc[i + 1] - out.query_start_loc[i], e.num_new_tokens);
    EXPECT_EQ(out.seq_lens[i], e.start_position + e.num_new_tokens);
    EXPECT_LE(out.seq_lens[i], seq->num_tokens());
    EXPECT_EQ(i < static_cast<size_t>(out.num_decode_seqs), e.num_new_tokens == 1);
    auto table = s.kv().block_table(e.seq_id);
    for (int32_t j = 0; j < e.num_new_tokens; ++j) {
      int32_t row = out.query_start_loc[i] + j, p = e.start_position + j;
      EXPECT_EQ(out.positions[row], p);
      EXPECT_EQ(out.token_ids[row], seq->tokens[p]);
      EXPECT_EQ(out.slot_mapping[row], table[p / bs] * bs + p % bs);
      EXPECT_EQ(out.block_tables[i * out.max_blocks_per_seq + p / bs], table[p / bs]);
    }
    bool last = out.seq_lens[i] == seq->num_tokens();
    if (e.logits_index >= 0) {
      num_sampling += 1 + e.num_draft_tokens;
      EXPECT_TRUE(last) << "seq " << e.seq_id << " samples before its last token";
      EXPECT_EQ(e.num_draft_tokens, seq->num_draft_tokens);
      EXPECT_LT(e.num_draft_tokens, e.num_new_tokens);
      // One row after the last real token and after each draft.
      for (int32_t j = 0; j <= e.num_draft_tokens; ++j) {
        EXPECT_EQ(out.logits_rows[e.logits_index + j],
                  out.query_start_loc[i + 1] - 1 - e.num_draft_tokens + j);
      }
    } else {
      EXPECT_EQ(e.num_draft_tokens, 0);
    }
  }
  EXPECT_EQ(num_sampling, static_cast<int32_t>(out.logits_rows.size()));
  EXPECT_EQ(out.copy_src.size(), out.copy_dst.size());
}

struct Harness {
  explicit Harness(const SchedulerConfig& config) : s(Scheduler::create(config).value()) {}

  SeqId add(RequestId id, Ids prompt, int32_t priority = 0, int32_t num_seqs = 1,
            int32_t max_new_tokens = 0) {
    RequestSpec spec;
    spec.id = id;
    spec.prompt_tokens = std::move(prompt);
    spec.priority = priority;
    spec.num_seqs = num_seqs;
    spec.max_new_tokens = max_new_tokens;
    auto r = s.add_request(std::move(spec));
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : -1;
  }

  // One engine iteration with the fake model; sampled tokens are appended
  // unless the sequence's request is in `hold` (the test appends itself).
  ScheduleOutput step(const std::vector<RequestId>& hold = {}) {
    ScheduleOutput out = s.schedule();
    expect_consistent(s, out);
    std::vector<SampledToken> sampled;
    for (const ScheduledSeq& e : out.seqs) {
      if (e.logits_index < 0 || std::find(hold.begin(), hold.end(), e.request_id) != hold.end())
        continue;
      sampled.push_back({e.seq_id, fake_next_token(s.sequence(e.seq_id)->tokens)});
    }
    Status st = s.update(sampled);
    EXPECT_TRUE(st.ok()) << st.error().message;
    Status inv = s.check_invariants();
    EXPECT_TRUE(inv.ok()) << inv.error().message;
    return out;
  }

  Ids output(SeqId seq) const {
    const Sequence* q = s.sequence(seq);
    return Ids(q->tokens.begin() + q->num_prompt_tokens, q->tokens.end());
  }

  Scheduler s;
};

// What a sequence generates with the fake model, alone: prompt + n tokens.
inline Ids reference_output(Ids tokens, int32_t n) {
  Ids out;
  for (int32_t i = 0; i < n; ++i) {
    out.push_back(fake_next_token(tokens));
    tokens.push_back(out.back());
  }
  return out;
}

}  // namespace pagoda::testing
