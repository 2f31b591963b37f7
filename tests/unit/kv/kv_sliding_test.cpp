// KvManager with a sliding-window group: blocks released as the window
// passes (chunked prefill and decode), prefix hits that need the window's
// blocks in the sliding pool (and are shortened when those were evicted),
// fork + copy-on-write per group, shrink after drafts, the per-sequence
// bound. Exact block ids.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/kv_manager.h"

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t N = kNullBlock;

Ids iota_tokens(int32_t n, int32_t first = 100) {
  Ids t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

Ids sliding(const KvManager& kv, SeqId seq) {
  auto t = kv.sliding_block_table(seq);
  return Ids(t.begin(), t.end());
}

void expect_ok(const KvManager& kv) {
  Status st = kv.check_invariants();
  EXPECT_TRUE(st.ok()) << st.error().message;
}

// Window 5 over blocks of 4: the query at position p reads (p - 5, p].
KvConfig windowed(int32_t num_blocks, int32_t num_sliding_blocks) {
  return {.num_blocks = num_blocks,
          .block_size = 4,
          .sliding_window = 5,
          .num_sliding_blocks = num_sliding_blocks};
}

TEST(KvSliding, NoSlidingGroupKeepsNoSlidingTable) {
  KvManager kv({.num_blocks = 4, .block_size = 4});
  kv.allocate(1, {}, 6, {});
  EXPECT_FALSE(kv.has_sliding_group());
  EXPECT_TRUE(sliding(kv, 1).empty());
  EXPECT_EQ(kv.blocks_needed(1, 9), (KvBlocks{1, 0}));
  expect_ok(kv);
}

TEST(KvSliding, ReleasesBlocksAsTheWindowPasses) {
  KvManager kv(windowed(8, 8));
  Ids t = iota_tokens(20);
  PrefixHit none = kv.find_prefix(std::span(t).first(10), {});
  EXPECT_EQ(kv.blocks_needed(none, 10), (KvBlocks{3, 3}));
  kv.allocate(1, none, 10, {});
  EXPECT_EQ(sliding(kv, 1), (Ids{0, 1, 2}));
  // The next query (position 10) reads 6..10: block 0 (positions 0..3) goes,
  // cached (it is full), so it is idle, not empty.
  kv.commit(1, t, 10);
  EXPECT_EQ(sliding(kv, 1), (Ids{N, 1, 2}));
  EXPECT_EQ(kv.sliding_ref_count(0), 0);
  EXPECT_TRUE(kv.is_sliding_cached(0));
  KvStats st = kv.stats();
  EXPECT_EQ(st.num_sliding_used_blocks, 2);
  EXPECT_EQ(st.num_sliding_cached_blocks, 1);
  EXPECT_EQ(st.num_used_blocks, 3);  // the full group keeps everything
  expect_ok(kv);
  // Decode position 10: nothing new, nothing released (window 7..11).
  EXPECT_EQ(kv.blocks_needed(1, 11), (KvBlocks{0, 0}));
  std::vector<BlockCopy> copies;
  kv.grow(1, 11, copies);
  kv.commit(1, t, 11);
  EXPECT_EQ(sliding(kv, 1), (Ids{N, 1, 2}));
  // Position 11: the next query (12) reads 8..12, so block 1 (4..7) goes.
  kv.grow(1, 12, copies);
  kv.commit(1, t, 12);
  EXPECT_EQ(sliding(kv, 1), (Ids{N, N, 2}));
  // Position 12 needs a block in each group.
  EXPECT_EQ(kv.blocks_needed(1, 13), (KvBlocks{1, 1}));
  kv.grow(1, 13, copies);
  kv.commit(1, t, 13);
  EXPECT_EQ(sliding(kv, 1), (Ids{N, N, 2, 3}));
  EXPECT_TRUE(copies.empty());
  expect_ok(kv);
  kv.free(1);
  EXPECT_EQ(kv.stats().num_sliding_used_blocks, 0);
  expect_ok(kv);
}

TEST(KvSliding, ChunkedPrefillKeepsTheWindowBehindTheNextChunk) {
  KvManager kv(windowed(8, 8));
  Ids t = iota_tokens(16);
  kv.allocate(1, {}, 8, {});
  kv.commit(1, t, 8);  // next chunk's first query (8) reads 4..8
  EXPECT_EQ(sliding(kv, 1), (Ids{N, 1}));
  // An 8-token chunk writes 8..15: two new blocks in both groups.
  EXPECT_EQ(kv.blocks_needed(1, 16), (KvBlocks{2, 2}));
  std::vector<BlockCopy> copies;
  kv.grow(1, 16, copies);
  EXPECT_EQ(sliding(kv, 1), (Ids{N, 1, 2, 3}));  // empty blocks before the cached block 0
  kv.commit(1, t, 16);                           // next query 16 reads 12..16
  EXPECT_EQ(sliding(kv, 1), (Ids{N, N, N, 3}));
  expect_ok(kv);
}

TEST(KvSliding, PrefixHitNeedsOnlyTheWindowBlocks) {
  KvManager kv(windowed(16, 8));
  Ids a = iota_tokens(17);
  kv.allocate(1, {}, 17, {});
  kv.commit(1, a, 17);
  EXPECT_EQ(sliding(kv, 1), (Ids{N, N, N, 3, 4}));
  kv.free(1);
  Ids b = iota_tokens(18);
  PrefixHit hit = kv.find_prefix(b, {});
  // 16 tokens hit; the query at 16 reads 12..16, so only block 3 is needed.
  EXPECT_EQ(hit.num_tokens, 16);
  EXPECT_EQ(hit.blocks, (Ids{0, 1, 2, 3}));
  EXPECT_EQ(hit.sliding_blocks, (Ids{N, N, N, 3}));
  // Full: one new + four idle hit blocks; sliding: one new + block 3.
  EXPECT_EQ(kv.blocks_needed(hit, 18), (KvBlocks{5, 2}));
  kv.allocate(2, hit, 18, {});
  EXPECT_EQ(sliding(kv, 2), (Ids{N, N, N, 3, 5}));
  EXPECT_EQ(kv.num_computed_tokens(2), 16);
  expect_ok(kv);
}

TEST(KvSliding, PrefixHitIsShortenedWhenTheWindowBlocksWereEvicted) {
  KvManager kv(windowed(16, 5));
  Ids a = iota_tokens(17);
  kv.allocate(1, {}, 17, {});
  kv.commit(1, a, 17);
  kv.free(1);  // sliding: 0, 1, 2, 3 cached idle (LRU order), 4 empty
  // X re-uses block 0 (a one-block hit needs the window 0..4 only).
  Ids x(a.begin(), a.begin() + 5);
  PrefixHit hx = kv.find_prefix(x, {});
  EXPECT_EQ(hx.sliding_blocks, (Ids{0}));
  kv.allocate(10, hx, 5, {});
  EXPECT_EQ(sliding(kv, 10), (Ids{0, 4}));  // X took the empty block; Y evicts 1, 2, 3
  kv.allocate(11, {}, 12, {});
  EXPECT_EQ(sliding(kv, 11), (Ids{1, 2, 3}));
  kv.free(11);
  kv.free(10);
  // The full group still caches 4 blocks of a, the sliding pool only block
  // 0: the hit is cut to the one block whose window is there.
  Ids c = iota_tokens(18);
  PrefixHit hit = kv.find_prefix(c, {});
  EXPECT_EQ(hit.num_tokens, 4);
  EXPECT_EQ(hit.blocks, (Ids{0}));
  EXPECT_EQ(hit.sliding_blocks, (Ids{0}));
  expect_ok(kv);
}

TEST(KvSliding, ForkSharesBothGroupsAndCopiesOnWritePerGroup) {
  KvManager kv(windowed(8, 8));
  Ids t = iota_tokens(6);
  kv.allocate(1, {}, 6, {});
  kv.commit(1, t, 6);
  kv.fork(1, 2);
  EXPECT_EQ(kv.sliding_ref_count(1), 2);
  EXPECT_EQ(kv.blocks_needed(2, 7), (KvBlocks{1, 1}));
  std::vector<BlockCopy> copies;
  kv.grow(2, 7, copies);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].group, KvGroup::kFull);
  EXPECT_EQ(copies[1].group, KvGroup::kSliding);
  EXPECT_EQ(copies[1].src, 1);
  EXPECT_EQ(copies[1].dst, 2);
  EXPECT_EQ(sliding(kv, 2), (Ids{0, 2}));
  expect_ok(kv);
}

TEST(KvSliding, ShrinkAfterRejectedDraftsKeepsTheWindow) {
  KvManager kv(windowed(8, 8));
  Ids t = iota_tokens(16);
  kv.allocate(1, {}, 9, {});
  kv.commit(1, t, 9);
  EXPECT_EQ(sliding(kv, 1), (Ids{N, 1, 2}));
  std::vector<BlockCopy> copies;
  kv.grow(1, 14, copies);  // position 9 and four drafts
  kv.commit(1, t, 10);     // one draft accepted: window 6..10
  kv.shrink(1, 10);
  EXPECT_EQ(sliding(kv, 1), (Ids{N, 1, 2}));
  EXPECT_EQ(kv.stats().num_sliding_used_blocks, 2);
  expect_ok(kv);
}

TEST(KvSliding, PerSequenceBound) {
  KvManager kv(windowed(10, 10));
  // Decode: 4 positions behind + 1 new span at most 3 blocks.
  EXPECT_EQ(kv.max_blocks_per_seq(40, 1), (KvBlocks{10, 3}));
  // 16-token chunks: 20 positions, at most 6 blocks.
  EXPECT_EQ(kv.max_blocks_per_seq(40, 16), (KvBlocks{10, 6}));
  EXPECT_EQ(kv.max_blocks_per_seq(8, 64), (KvBlocks{2, 2}));
  KvManager plain({.num_blocks = 10, .block_size = 4});
  EXPECT_EQ(plain.max_blocks_per_seq(40, 16), (KvBlocks{10, 0}));
}

}  // namespace
}  // namespace pagoda
