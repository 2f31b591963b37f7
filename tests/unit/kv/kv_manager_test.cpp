// KvManager: block tables, prefix hits, partial blocks, LRU eviction through
// sequences, fork + copy-on-write, free, counters. Exact block ids.
#include "kv/kv_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;

Ids iota_tokens(int32_t n, int32_t first = 100) {
  Ids t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

Ids table(const KvManager& kv, SeqId seq) {
  auto t = kv.block_table(seq);
  return Ids(t.begin(), t.end());
}

// Admits seq with tokens: prefix lookup, then allocation of all slots.
PrefixHit admit(KvManager& kv, SeqId seq, const Ids& tokens) {
  PrefixHit hit = kv.find_prefix(tokens, {});
  int32_t slots = static_cast<int32_t>(tokens.size());
  EXPECT_TRUE(kv.can_allocate(hit, slots));
  kv.allocate(seq, hit, slots, {});
  return hit;
}

void expect_ok(const KvManager& kv) {
  Status st = kv.check_invariants();
  EXPECT_TRUE(st.ok()) << st.error().message;
}

TEST(KvManager, AllocatesTablesCoveringSlots) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  Ids t = iota_tokens(10);
  PrefixHit hit = kv.find_prefix(t, {});
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_EQ(kv.blocks_needed(hit, 10).full, 3);
  kv.allocate(1, hit, 10, {});
  EXPECT_EQ(table(kv, 1), (Ids{0, 1, 2}));
  EXPECT_EQ(kv.num_computed_tokens(1), 0);
  EXPECT_EQ(kv.stats().num_used_blocks, 3);
  EXPECT_EQ(kv.stats().num_free_blocks, 5);
  expect_ok(kv);
}

TEST(KvManager, PrefixHitsWholeComputedBlocksButNeverTheWholePrompt) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  Ids a = iota_tokens(10);
  admit(kv, 1, a);
  kv.commit(1, a, 10);  // blocks 0, 1 full; block 2 holds 2 tokens
  EXPECT_TRUE(kv.is_cached(0));
  EXPECT_TRUE(kv.is_cached(1));
  EXPECT_FALSE(kv.is_cached(2));  // partial blocks are never cached

  // Same 10 tokens: 2 blocks hit; the last block must be recomputed.
  PrefixHit same = kv.find_prefix(a, {});
  EXPECT_EQ(same.blocks, (Ids{0, 1}));
  EXPECT_EQ(same.num_tokens, 8);
  // Exactly 8 equal tokens: only one block, so one token is left to compute.
  Ids eight(a.begin(), a.begin() + 8);
  EXPECT_EQ(kv.find_prefix(eight, {}).blocks, (Ids{0}));
  // A different second block stops the chain after block 0.
  Ids b = a;
  b[5] = 7;
  EXPECT_EQ(kv.find_prefix(b, {}).blocks, (Ids{0}));
  // Extra keys (e.g. a LoRA id) separate caches.
  std::vector<uint64_t> lora = {3};
  EXPECT_EQ(kv.find_prefix(a, lora).num_tokens, 0);

  // Admit a second sequence sharing 2 blocks: 12 tokens, third block new.
  Ids c = iota_tokens(12);
  PrefixHit hit = admit(kv, 2, c);
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(table(kv, 2), (Ids{0, 1, 3}));
  EXPECT_EQ(kv.num_computed_tokens(2), 8);
  EXPECT_EQ(kv.ref_count(0), 2);
  EXPECT_EQ(kv.ref_count(1), 2);
  KvStats st = kv.stats();
  EXPECT_EQ(st.num_query_tokens, 10 + 12);
  EXPECT_EQ(st.num_hit_tokens, 8);
  EXPECT_DOUBLE_EQ(st.hit_rate(), 8.0 / 22.0);
  expect_ok(kv);
}

TEST(KvManager, PartialBlockIsCachedOnceFullAndComputed) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  Ids a = iota_tokens(7);
  admit(kv, 1, a);
  kv.commit(1, a, 3);
  EXPECT_FALSE(kv.is_cached(0));  // 3 of 4 computed
  kv.commit(1, a, 7);
  EXPECT_TRUE(kv.is_cached(0));
  EXPECT_FALSE(kv.is_cached(1));
  // Decode: token 7 appended, slot 7 allocated within block 1, computed.
  a.push_back(999);
  std::vector<BlockCopy> copies;
  EXPECT_EQ(kv.blocks_needed(1, 8).full, 0);
  kv.grow(1, 8, copies);
  kv.commit(1, a, 8);
  EXPECT_TRUE(kv.is_cached(1));
  EXPECT_TRUE(copies.empty());
  Ids probe = a;
  probe.push_back(5);
  EXPECT_EQ(kv.find_prefix(probe, {}).blocks, (Ids{0, 1}));
  expect_ok(kv);
}

TEST(KvManager, FreedPrefixIsEvictedTailFirstInLruOrder) {
  KvManager kv({.num_blocks = 4, .block_size = 2});
  Ids a = {1, 2, 3, 4, 5};
  admit(kv, 1, a);     // blocks 0 1 2
  kv.commit(1, a, 5);  // caches 0 = [1 2], 1 = [3 4]
  kv.free(1);          // releases 2 (empty), 1, 0 (cached idle, in that order)
  KvStats st = kv.stats();
  EXPECT_EQ(st.num_used_blocks, 0);
  EXPECT_EQ(st.num_cached_blocks, 2);
  EXPECT_EQ(st.num_free_blocks, 2);
  expect_ok(kv);

  // 6 unrelated tokens need 3 blocks: empty 3 and 2 first, then evict 1
  // (the prefix's tail), keeping block 0 (its head).
  Ids b = {9, 9, 9, 9, 9, 9};
  admit(kv, 2, b);
  EXPECT_EQ(table(kv, 2), (Ids{3, 2, 1}));
  EXPECT_EQ(kv.stats().num_evictions, 1);
  Ids probe = {1, 2, 3, 4, 5};
  EXPECT_EQ(kv.find_prefix(probe, {}).blocks, (Ids{0}));
  expect_ok(kv);

  // A hit on the idle block 0 takes it out of the evictable set.
  PrefixHit hit = kv.find_prefix(probe, {});
  EXPECT_EQ(kv.num_allocatable_blocks(), 1);
  EXPECT_EQ(kv.blocks_needed(hit, 5).full, 3);  // 2 new + block 0 leaving the idle set
  EXPECT_FALSE(kv.can_allocate(hit, 5));
  EXPECT_EQ(kv.blocks_needed(hit, 4).full, 2);
  EXPECT_FALSE(kv.can_allocate(hit, 4));
  EXPECT_TRUE(kv.can_allocate(hit, 2));
}

// Speculative drafts' slots past the verified tokens go back to the pool,
// last block first, and the table keeps covering the computed tokens.
TEST(KvManager, ShrinkReleasesTheTableTail) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  const Ids tokens = iota_tokens(5);
  admit(kv, 1, tokens);
  std::vector<BlockCopy> copies;
  kv.grow(1, 14, copies);  // drafts to slot 13: 4 blocks
  ASSERT_EQ(table(kv, 1).size(), 4u);
  kv.commit(1, tokens, 5);
  const Ids before = table(kv, 1);
  kv.shrink(1, 6);
  EXPECT_EQ(table(kv, 1), Ids(before.begin(), before.begin() + 2));
  EXPECT_EQ(kv.num_allocatable_blocks(), 6);
  expect_ok(kv);
  kv.shrink(1, 5);  // already within: nothing to release
  EXPECT_EQ(table(kv, 1).size(), 2u);
  // The released blocks are handed out again, the last released last.
  admit(kv, 2, iota_tokens(4, 500));
  EXPECT_NE(table(kv, 2)[0], before[2]);
  expect_ok(kv);
}

TEST(KvManager, ForkSharesBlocksAndCopiesOnWrite) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  Ids a = iota_tokens(6);
  admit(kv, 1, a);
  kv.commit(1, a, 6);  // table [0, 1]; block 1 holds positions 4, 5
  kv.fork(1, 2);
  EXPECT_EQ(table(kv, 2), (Ids{0, 1}));
  EXPECT_EQ(kv.ref_count(0), 2);
  EXPECT_EQ(kv.ref_count(1), 2);
  EXPECT_EQ(kv.num_computed_tokens(2), 6);
  expect_ok(kv);

  // Child writes position 6 into the shared partial block 1: private copy.
  std::vector<BlockCopy> copies;
  EXPECT_EQ(kv.blocks_needed(2, 7).full, 1);
  kv.grow(2, 7, copies);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, 1);
  EXPECT_EQ(copies[0].dst, 2);
  EXPECT_EQ(table(kv, 2), (Ids{0, 2}));
  EXPECT_EQ(kv.ref_count(1), 1);
  // The parent now owns block 1 alone and writes in place.
  copies.clear();
  EXPECT_EQ(kv.blocks_needed(1, 7).full, 0);
  kv.grow(1, 7, copies);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(table(kv, 1), (Ids{0, 1}));
  // The full shared block 0 is never copied; growing past it adds blocks.
  kv.grow(1, 9, copies);
  EXPECT_EQ(table(kv, 1), (Ids{0, 1, 3}));
  EXPECT_TRUE(copies.empty());
  expect_ok(kv);

  kv.free(1);
  EXPECT_EQ(kv.ref_count(0), 1);
  kv.free(2);
  KvStats st = kv.stats();
  EXPECT_EQ(st.num_used_blocks, 0);
  EXPECT_EQ(st.num_cached_blocks, 1);  // block 0 = tokens 100..103
  EXPECT_EQ(st.num_free_blocks, 7);
  expect_ok(kv);
}

TEST(KvManager, CopyOnWriteOfUncomputedSharedBlockNeedsNoCopy) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  Ids a = iota_tokens(8);
  admit(kv, 1, a);     // table [0, 1], slots for 8 tokens
  kv.commit(1, a, 4);  // block 1 allocated but holds nothing computed
  kv.fork(1, 2);
  std::vector<BlockCopy> copies;
  kv.grow(2, 8, copies);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(table(kv, 2), (Ids{0, 2}));
  expect_ok(kv);
}

TEST(KvManager, DuplicateContentStaysPrivate) {
  KvManager kv({.num_blocks = 8, .block_size = 2});
  Ids a = {1, 2, 3};
  admit(kv, 1, a);  // [0, 1]
  admit(kv, 2, a);  // no hit yet: [2, 3]
  kv.commit(1, a, 3);
  kv.commit(2, a, 3);
  EXPECT_TRUE(kv.is_cached(0));
  EXPECT_FALSE(kv.is_cached(2));
  expect_ok(kv);
  kv.free(2);
  EXPECT_EQ(kv.stats().num_cached_blocks, 0);
  EXPECT_EQ(kv.stats().num_free_blocks, 6);
  expect_ok(kv);
}

TEST(KvManager, PrefixCachingDisabled) {
  KvManager kv({.num_blocks = 4, .block_size = 2, .enable_prefix_caching = false});
  Ids a = {1, 2, 3};
  admit(kv, 1, a);
  kv.commit(1, a, 3);
  EXPECT_FALSE(kv.is_cached(0));
  kv.free(1);
  EXPECT_EQ(kv.find_prefix(a, {}).num_tokens, 0);
  EXPECT_EQ(kv.stats().num_cached_blocks, 0);
  EXPECT_EQ(kv.stats().num_free_blocks, 4);
  expect_ok(kv);
}

}  // namespace
}  // namespace pagoda
