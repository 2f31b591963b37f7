// DraftKv without a model: exact block ids, least-recently-drafted eviction
// order, and the sequences it must never evict (the one reserving, those
// drafted in the current call).
#include "engine/draft_kv.h"

#include <gtest/gtest.h>

#include <vector>

namespace pagoda {
namespace {

// 6 blocks of 4 slots, tables of at most 4 blocks; records evictions.
struct Pool {
  std::vector<int64_t> evicted;
  DraftKv kv{6, 4, 4, [this](int64_t id) { evicted.push_back(id); }};

  std::vector<int32_t> table(int64_t id) const {
    const auto t = kv.manager().block_table(id);
    return {t.begin(), t.end()};
  }
};

TEST(DraftKvTest, ReservesGrowsAndShrinksTables) {
  Pool p;
  p.kv.begin_call();
  p.kv.mark_drafted(1);
  ASSERT_TRUE(p.kv.reserve(1, 5));  // 2 blocks
  EXPECT_EQ(p.table(1).size(), 2u);
  ASSERT_TRUE(p.kv.reserve(1, 12));  // grown to 3, the first two kept
  const std::vector<int32_t> grown = p.table(1);
  ASSERT_EQ(grown.size(), 3u);
  ASSERT_TRUE(p.kv.reserve(1, 4));  // never shrinks
  EXPECT_EQ(p.table(1), grown);
  p.kv.shrink(1, 4);
  EXPECT_EQ(p.table(1), std::vector<int32_t>(grown.begin(), grown.begin() + 1));
  EXPECT_EQ(p.kv.manager().num_allocatable_blocks(), 5);
  // Wider than a table (5 blocks > 4): refused, nothing evicted or changed.
  EXPECT_FALSE(p.kv.reserve(2, 17));
  EXPECT_FALSE(p.kv.manager().contains(2));
  p.kv.drop(1);
  EXPECT_EQ(p.kv.manager().num_allocatable_blocks(), 6);
  EXPECT_TRUE(p.evicted.empty());
  EXPECT_EQ(p.kv.num_evictions(), 0);
  EXPECT_TRUE(p.kv.manager().check_invariants().ok());
}

TEST(DraftKvTest, EvictsLeastRecentlyDraftedOutsideTheCurrentCall) {
  Pool p;
  // Call 1: 1 and 2 (2 blocks each); call 2: 3 (2 blocks), then 1 again.
  p.kv.begin_call();
  for (int64_t id : {1, 2}) {
    p.kv.mark_drafted(id);
    ASSERT_TRUE(p.kv.reserve(id, 8));
  }
  p.kv.begin_call();
  p.kv.mark_drafted(3);
  ASSERT_TRUE(p.kv.reserve(3, 8));
  p.kv.mark_drafted(1);
  // Call 3: 4 needs 2 blocks; the pool is full: 2 (call 1) goes, not 1 or 3 (call 2).
  p.kv.begin_call();
  p.kv.mark_drafted(4);
  ASSERT_TRUE(p.kv.reserve(4, 8));
  EXPECT_EQ(p.evicted, std::vector<int64_t>{2});
  // 5 in the same call needs 4 blocks: 1 and 3 (equally old: the lower id
  // first) go; 4, drafted in this call, stays.
  p.kv.mark_drafted(5);
  ASSERT_TRUE(p.kv.reserve(5, 16));
  EXPECT_EQ(p.evicted, (std::vector<int64_t>{2, 1, 3}));
  // 6 in the same call: only 4 and 5 hold blocks, both drafted now: refused.
  p.kv.mark_drafted(6);
  EXPECT_FALSE(p.kv.reserve(6, 1));
  EXPECT_EQ(p.kv.num_evictions(), 3);
  p.kv.drop(6);
  EXPECT_TRUE(p.kv.manager().check_invariants().ok());
}

TEST(DraftKvTest, NeverEvictsTheSequenceItGrows) {
  Pool p;
  // 7 holds 3 blocks and was never drafted (an EAGLE sequence that only
  // received hidden rows), 8 holds 3 from call 1.
  ASSERT_TRUE(p.kv.reserve(7, 12));
  p.kv.begin_call();
  p.kv.mark_drafted(8);
  ASSERT_TRUE(p.kv.reserve(8, 12));
  p.kv.begin_call();
  // Growing 7 by a block (unmarked: the oldest) evicts 8, never 7 itself.
  ASSERT_TRUE(p.kv.reserve(7, 16));
  EXPECT_EQ(p.evicted, std::vector<int64_t>{8});
  EXPECT_EQ(p.table(7).size(), 4u);
  EXPECT_TRUE(p.kv.manager().check_invariants().ok());
}

}  // namespace
}  // namespace pagoda
