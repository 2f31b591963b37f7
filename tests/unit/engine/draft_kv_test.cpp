// DraftKv without a model: exact block ids, least-recently-drafted eviction
// order, and the sequences it must never evict (the one reserving, those
// drafted in the current call); cached blocks kept at a sequence's end,
// reused by a later one, evicted least recently released first and before
// any sequence, never while a table holds them.
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

// Keyed tokens 0, 1, 2, ... (n of them), with `change` added at position `at`.
std::vector<int32_t> keyed(int32_t n, int32_t at = -1, int32_t change = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = i + (i == at ? change : 0);
  return t;
}

TEST(DraftKvTest, CachesFullBlocksOfItsRowsAtTheEndAndReusesThem) {
  Pool p;
  const std::vector<uint64_t> keys = {7};
  p.kv.begin_call();
  ASSERT_TRUE(p.kv.reserve(1, 10, {}, keys));
  const std::vector<int32_t> first = p.table(1);  // 3 blocks
  // Rows [0, 10) computed: blocks 0 and 1 are full, block 2 is not.
  p.kv.cache_and_drop(1, keyed(12), 10);
  EXPECT_FALSE(p.kv.manager().contains(1));
  EXPECT_EQ(p.kv.manager().stats().num_cached_blocks, 2);
  EXPECT_EQ(p.kv.manager().num_allocatable_blocks(), 6);
  // Every full block of the keyed tokens may match (8 of 8 tokens), only
  // under the same keys and tokens.
  EXPECT_EQ(p.kv.find_cached(keyed(8), keys).blocks,
            (std::vector<int32_t>{first[0], first[1]}));
  EXPECT_EQ(p.kv.find_cached(keyed(7), keys).num_tokens, 4);
  EXPECT_EQ(p.kv.find_cached(keyed(12, 5, 100), keys).blocks, std::vector<int32_t>{first[0]});
  EXPECT_EQ(p.kv.find_cached(keyed(12), std::vector<uint64_t>{8}).num_tokens, 0);
  // A sequence starting with the hit shares those blocks, then new ones.
  const PrefixHit hit = p.kv.find_cached(keyed(12), keys);
  ASSERT_EQ(hit.num_tokens, 8);
  ASSERT_TRUE(p.kv.reserve(2, 12, hit, keys));
  const std::vector<int32_t> second = p.table(2);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[0], first[0]);
  EXPECT_EQ(second[1], first[1]);
  EXPECT_EQ(p.kv.manager().num_computed_tokens(2), 8);
  EXPECT_EQ(p.kv.num_reused_blocks(), 2);
  EXPECT_EQ(p.kv.manager().ref_count(first[0]), 1);
  EXPECT_TRUE(p.kv.manager().check_invariants().ok());
  // Growing it never writes (copies) the shared rows.
  ASSERT_TRUE(p.kv.reserve(2, 16));
  EXPECT_EQ(p.table(2)[0], first[0]);
  // Fewer rows than it reused are not cached again; its blocks are released.
  p.kv.cache_and_drop(2, keyed(16), 12);
  EXPECT_EQ(p.kv.manager().stats().num_cached_blocks, 3);
  EXPECT_TRUE(p.evicted.empty());
  EXPECT_TRUE(p.kv.manager().check_invariants().ok());
}

TEST(DraftKvTest, EvictsCachedBlocksFirstAndNeverOnesInUse) {
  Pool p;
  p.kv.begin_call();
  // Sequence 1 caches keyed(8) (2 blocks), then sequence 2 caches another
  // 2 blocks (keys {2}): 4 cached idle blocks, 1's released longest ago.
  ASSERT_TRUE(p.kv.reserve(1, 8, {}, std::vector<uint64_t>{1}));
  const std::vector<int32_t> one = p.table(1);
  p.kv.cache_and_drop(1, keyed(8), 8);
  ASSERT_TRUE(p.kv.reserve(2, 8, {}, std::vector<uint64_t>{2}));
  p.kv.cache_and_drop(2, keyed(8), 8);
  EXPECT_EQ(p.kv.manager().stats().num_cached_blocks, 4);
  // 3 reuses 2's blocks (in use now); 4 needs 4 blocks: the 2 empty ones,
  // then 1's cached blocks (evicted), never 2's (held by 3) nor 3.
  const PrefixHit hit = p.kv.find_cached(keyed(8), std::vector<uint64_t>{2});
  ASSERT_EQ(hit.blocks.size(), 2u);
  ASSERT_TRUE(p.kv.reserve(3, 8, hit, std::vector<uint64_t>{2}));
  p.kv.mark_drafted(4);
  ASSERT_TRUE(p.kv.reserve(4, 16));
  EXPECT_TRUE(p.evicted.empty());  // no sequence evicted
  EXPECT_EQ(p.kv.find_cached(keyed(8), std::vector<uint64_t>{1}).num_tokens, 0);
  for (int32_t b : one) EXPECT_EQ(p.kv.manager().ref_count(b), 1);  // now 4's
  EXPECT_EQ(p.table(3), hit.blocks);
  // The pool is full, but 5 reuses the blocks 3 holds: shared, nothing evicted.
  const PrefixHit again = p.kv.find_cached(keyed(8), std::vector<uint64_t>{2});
  ASSERT_TRUE(p.kv.reserve(5, 8, again, std::vector<uint64_t>{2}));
  EXPECT_EQ(p.table(5), hit.blocks);
  EXPECT_EQ(p.kv.manager().ref_count(hit.blocks[0]), 2);
  EXPECT_TRUE(p.evicted.empty());
  // Growing 5 needs a block and none is allocatable: the least recently
  // drafted sequences go, never 5 -- 3 first (its blocks, still 5's, free
  // nothing), then 4.
  p.kv.begin_call();
  p.kv.mark_drafted(5);
  ASSERT_TRUE(p.kv.reserve(5, 9));
  EXPECT_EQ(p.evicted, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(p.kv.manager().ref_count(hit.blocks[0]), 1);
  EXPECT_TRUE(p.kv.manager().check_invariants().ok());
}

}  // namespace
}  // namespace pagoda
