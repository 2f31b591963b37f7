// BlockPool and block hashing: exact block ids, queue order, eviction order.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "kv/block_hash.h"

namespace pagoda {
namespace {

std::vector<int32_t> no_refs(int32_t n) {
  return std::vector<int32_t>(n, 0);
}

TEST(BlockHash, ChainsParentTokensAndExtraKeys) {
  std::vector<int32_t> a = {1, 2, 3, 4};
  std::vector<int32_t> b = {1, 2, 3, 5};
  std::vector<uint64_t> lora = {7};
  BlockHash h = hash_block(kRootBlockHash, a, {});
  EXPECT_EQ(h, hash_block(kRootBlockHash, a, {}));
  EXPECT_FALSE(h == hash_block(kRootBlockHash, b, {}));
  EXPECT_FALSE(h == hash_block(kRootBlockHash, a, lora));
  EXPECT_FALSE(hash_block(h, a, {}) == hash_block(kRootBlockHash, a, {}));
  // The counts separate token and extra-key boundaries.
  std::vector<int32_t> t3 = {1, 2, 3};
  std::vector<uint64_t> e1 = {4};
  EXPECT_FALSE(hash_block(kRootBlockHash, t3, e1) == hash_block(kRootBlockHash, a, {}));
}

TEST(BlockPool, AllocatesEmptyBlocksInIdOrderThenReleasedOrder) {
  BlockPool pool(4, 2);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  pool.release(0);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), 3);
  EXPECT_EQ(pool.allocate(), 0);  // released longest ago
  EXPECT_EQ(pool.num_allocatable_blocks(), 0);
  EXPECT_EQ(pool.num_used_blocks(), 4);
}

TEST(BlockPool, EvictsCachedIdleBlocksLeastRecentlyReleasedFirst) {
  BlockPool pool(3, 2);
  std::vector<int32_t> t0 = {1, 2}, t1 = {3, 4}, t2 = {5, 6};
  BlockHash h0 = hash_block(kRootBlockHash, t0, {});
  BlockHash h1 = hash_block(h0, t1, {});
  BlockHash h2 = hash_block(h1, t2, {});
  for (int32_t b = 0; b < 3; ++b) EXPECT_EQ(pool.allocate(), b);
  EXPECT_TRUE(pool.cache(0, h0, kRootBlockHash, t0, {}));
  EXPECT_TRUE(pool.cache(1, h1, h0, t1, {}));
  EXPECT_TRUE(pool.cache(2, h2, h1, t2, {}));
  EXPECT_FALSE(pool.cache(2, h2, h1, t2, {}));  // already cached
  pool.release(2);
  pool.release(0);
  pool.release(1);
  EXPECT_EQ(pool.num_cached_idle_blocks(), 3);
  EXPECT_EQ(pool.num_empty_blocks(), 0);
  ASSERT_TRUE(pool.check_invariants(no_refs(3)).ok());

  // A hit on block 0 makes it used; released again it becomes most recent.
  EXPECT_EQ(pool.find_cached(h0, kRootBlockHash, t0, {}), 0);
  pool.retain(0);
  pool.release(0);
  // LRU order is now 2, 1, 0.
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.find_cached(h2, h1, t2, {}), -1);  // evicted
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.find_cached(h0, kRootBlockHash, t0, {}), 0);
  EXPECT_EQ(pool.num_evictions(), 2);
  std::vector<int32_t> refs = {0, 1, 1};
  EXPECT_TRUE(pool.check_invariants(refs).ok());
}

TEST(BlockPool, HitNeedsEqualTokensParentAndExtraKeys) {
  BlockPool pool(2, 2);
  std::vector<int32_t> t = {1, 2}, other = {1, 3};
  std::vector<uint64_t> lora = {9};
  BlockHash h = hash_block(kRootBlockHash, t, lora);
  int32_t b = pool.allocate();
  ASSERT_TRUE(pool.cache(b, h, kRootBlockHash, t, lora));
  EXPECT_EQ(pool.find_cached(h, kRootBlockHash, t, lora), b);
  // Same hash presented with different content (a forced collision) is a miss.
  EXPECT_EQ(pool.find_cached(h, kRootBlockHash, other, lora), -1);
  EXPECT_EQ(pool.find_cached(h, kRootBlockHash, t, {}), -1);
  EXPECT_EQ(pool.find_cached(h, h, t, lora), -1);
  // Another block cannot cache the same hash.
  int32_t b2 = pool.allocate();
  EXPECT_FALSE(pool.cache(b2, h, kRootBlockHash, t, lora));
  EXPECT_FALSE(pool.is_cached(b2));
}

TEST(BlockPool, InvariantsCatchRefMismatch) {
  BlockPool pool(2, 2);
  pool.allocate();
  std::vector<int32_t> wrong = {0, 0};
  Status st = pool.check_invariants(wrong);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("block 0"), std::string::npos);
  std::vector<int32_t> right = {1, 0};
  EXPECT_TRUE(pool.check_invariants(right).ok());
}

}  // namespace
}  // namespace pagoda
