// Scheduler with a sliding-window KV group: a sequence many windows long
// runs to the end in a sliding pool of only the window's blocks (so the
// step's sliding tables release what the window left), and admission
// refuses a request whose window cannot fit the sliding pool.
#include <gtest/gtest.h>

#include "sched_harness.h"

namespace pagoda {
namespace {

using testing::Harness;
using testing::small_config;
using testing::tokens_from;

// Window 5 over blocks of 4, steps of at most 4 tokens: a sequence holds at
// most ceil((4 + 4) / 4) + 1 = 3 sliding blocks.
SchedulerConfig windowed(int32_t num_sliding_blocks) {
  SchedulerConfig c = small_config(16, 4, 8, 1);  // max_model_len 64
  c.max_chunk_tokens = 4;
  c.kv.sliding_window = 5;
  c.kv.num_sliding_blocks = num_sliding_blocks;
  return c;
}

TEST(SchedulerSliding, LongSequenceRunsInASlidingPoolOfTheWindow) {
  Harness h(windowed(3));
  SeqId seq = h.add(1, tokens_from(1, 20), 0, 1, 30);
  int32_t max_live = 0;  // sliding blocks a step reads
  testing::Ids got;
  for (int32_t step = 0; step < 100 && h.s.has_unfinished(); ++step) {
    ScheduleOutput out = h.step();
    ASSERT_EQ(out.seqs.size(), 1u);
    const int32_t* row = out.sliding_block_tables.data();
    // The first query of the step reads from start - 4 on; everything
    // before is released.
    const int32_t lowest = std::max(0, out.seqs[0].start_position - 4);
    int32_t num_live = 0;
    for (int32_t b = 0; b < out.max_blocks_per_seq; ++b) {
      EXPECT_EQ(row[b] == kNullBlock, b < lowest / 4) << "step " << step << " block " << b;
      num_live += row[b] != kNullBlock;
    }
    max_live = std::max(max_live, num_live);
    if (h.output(seq).size() == 30u) {
      got = h.output(seq);
      ASSERT_TRUE(h.s.finish(seq, SeqEndReason::kLength).ok());
    }
  }
  EXPECT_FALSE(h.s.has_unfinished());
  EXPECT_EQ(got, testing::reference_output(tokens_from(1, 20), 30));
  // 50 tokens would take 13 blocks; aligned 4-token chunks and decodes read
  // at most 8 positions in 2 blocks.
  EXPECT_EQ(max_live, 2);
  EXPECT_EQ(h.s.stats().kv.num_sliding_used_blocks, 0);
  EXPECT_EQ(h.s.stats().num_preemptions, 0);
}

TEST(SchedulerSliding, AddRequestRefusesAWindowBeyondTheSlidingPool) {
  Harness h(windowed(2));
  RequestSpec spec{.id = 1, .prompt_tokens = tokens_from(1, 20), .max_new_tokens = 30};
  auto r = h.s.add_request(std::move(spec));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("need 3 sliding-window KV blocks; the sliding pool has 2"),
            std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace pagoda
