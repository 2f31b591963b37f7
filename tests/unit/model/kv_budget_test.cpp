#include "model/kv_budget.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

constexpr int64_t kBlockBytes = 4096;  // one block of 16 tokens
constexpr size_t kGiB = size_t{1} << 30;

// Bytes of one sequence of `len` tokens in one group of kBlockBytes blocks.
double seq_bytes(int64_t len) {
  return static_cast<double>((len + 15) / 16 * kBlockBytes);
}

TEST(CpuKvBudget, HoldsMaxNumSeqsFullLengthSequences) {
  // 8 sequences x ceil(100 / 16) = 7 blocks each.
  KvBudget b = cpu_kv_budget(seq_bytes(100), 0, 100, 8, 64 * kGiB);
  EXPECT_EQ(b.bytes, 8 * 7 * kBlockBytes);
  EXPECT_EQ(b.how, "room for 8 seqs x 100 tokens");
  // Twice the sequences or twice the length: twice the pool.
  EXPECT_EQ(cpu_kv_budget(seq_bytes(100), 0, 100, 16, 64 * kGiB).bytes, 2 * b.bytes);
  EXPECT_EQ(cpu_kv_budget(seq_bytes(224), 0, 224, 8, 64 * kGiB).bytes, 2 * b.bytes);
}

TEST(CpuKvBudget, TakesAtMostHalfTheAvailableMemory) {
  // 256 seqs x 512 blocks of 4 KiB = 512 MiB wanted, of 512 MiB available.
  const size_t available = 512u << 20;
  KvBudget b = cpu_kv_budget(seq_bytes(8192), 0, 8192, 256, available);
  EXPECT_EQ(b.bytes, kCpuKvAvailableFraction * available);
  EXPECT_EQ(b.how,
            "room for 256 seqs x 8192 tokens would take 0.50 GiB; capped at 50% of the 0.50 GiB of "
            "memory "
            "available");
  // Unknown available memory: capped at 1 GiB.
  KvBudget unknown = cpu_kv_budget(seq_bytes(8192), 0, 8192, 1024, 0);
  EXPECT_EQ(unknown.bytes, kCpuKvFallbackBytes);
  EXPECT_NE(unknown.how.find("memory available unknown"), std::string::npos) << unknown.how;
  EXPECT_EQ(cpu_kv_budget(seq_bytes(16), 0, 16, 1, 0).bytes, kBlockBytes);  // small wins
}

TEST(CpuKvBudget, RanksOfOneProcessShareTheCap) {
  const size_t available = 512u << 20;  // cap 256 MiB, of 512 MiB wanted
  KvBudget four = cpu_kv_budget(seq_bytes(8192), 0, 8192, 256, available, 4);
  EXPECT_EQ(four.bytes, kCpuKvAvailableFraction * available / 4);
  EXPECT_NE(four.how.find("capped at 50% of the 0.50 GiB of memory available, shared by 4 ranks"),
            std::string::npos)
      << four.how;
  // What fits under each rank's share is taken whole.
  EXPECT_EQ(cpu_kv_budget(seq_bytes(16), 0, 16, 1, available, 4).bytes, kBlockBytes);
}

TEST(ExplicitKvBudget, IsTheGivenSize) {
  KvBudget b = explicit_kv_budget(int64_t{3} << 29);
  EXPECT_EQ(b.bytes, 1.5 * kGiB);
  EXPECT_EQ(b.how, "--kv-cache-memory-bytes 1.50 GiB");
  EXPECT_EQ(explicit_kv_budget(int64_t{5} << 19).how, "--kv-cache-memory-bytes 2.5 MiB");
}

// Gemma-3-like: 5 sliding layers to 1 full one (block bytes 5:1), window 64,
// steps of up to 32 tokens over 2 sequences, blocks of 16.
KvGroupShape gemma_like() {
  return {.full_block_bytes = 1000,
          .sliding_block_bytes = 5000,
          .block_size = 16,
          .window = 64,
          .max_step_tokens = 32,
          .max_step_seqs = 2};
}

TEST(KvGroups, BlocksPerSequenceBoundTheWindow) {
  const KvGroupShape g = gemma_like();
  // 1024 tokens: 64 full blocks; the window of 64 behind the next token
  // spans at most ceil(64 / 16) + 1 = 5 blocks.
  EXPECT_EQ(kv_blocks_per_seq(g, 1024).full, 64);
  EXPECT_EQ(kv_blocks_per_seq(g, 1024).sliding, 5);
  EXPECT_EQ(kv_seq_bytes(g, 1024), 64 * 1000 + 5 * 5000);
  // A sequence shorter than its window keeps every block in both groups.
  EXPECT_EQ(kv_blocks_per_seq(g, 40).sliding, 3);
  // A step adds its new tokens' blocks and one per sequence: 32 / 16 + 2.
  EXPECT_EQ(kv_step_blocks(g), 4);
  KvGroupShape none = g;
  none.window = 0;
  EXPECT_EQ(kv_blocks_per_seq(none, 1024).sliding, 0);
  EXPECT_EQ(kv_seq_bytes(none, 1024), 64 * 1000);
  EXPECT_EQ(kv_step_blocks(none), 0);
}

TEST(KvGroups, TheBudgetHoldsTheSameSequencesInBothPools) {
  const KvGroupShape g = gemma_like();
  const double seq = kv_seq_bytes(g, 1024);  // 89,000 bytes
  const double step = 4 * 5000;
  const KvPoolSizes ten = split_kv_budget(10 * seq + step, g, 1024);
  EXPECT_EQ(ten.full, 640);
  EXPECT_EQ(ten.sliding, 54);  // 10 x 5 + the step's 4
  const KvPoolSizes some = split_kv_budget(2.5 * seq + step, g, 1024);
  EXPECT_EQ(some.full, 160);
  EXPECT_EQ(some.sliding, 16);  // floor(2.5 x 5) + 4
  // Without the group: the bytes in full blocks, as before.
  KvGroupShape none = g;
  none.window = 0;
  none.sliding_block_bytes = 0;
  EXPECT_EQ(split_kv_budget(10 * seq + step, none, 1024).full, 910);
  EXPECT_EQ(split_kv_budget(10 * seq + step, none, 1024).sliding, 0);
  // Less than one sequence and a step: one sequence at its largest step,
  // whose window spans ceil((63 + 32) / 16) + 1 = 7 blocks: of 1024 tokens
  // when 64 + 7 blocks fit (99,000 bytes), else of the longest length that
  // fits (25 + 7 blocks = 60,000 bytes).
  EXPECT_EQ(split_kv_budget(100'000, g, 1024).full, 64);
  EXPECT_EQ(split_kv_budget(100'000, g, 1024).sliding, 7);
  const KvPoolSizes short_seq = split_kv_budget(60'500, g, 1024);
  EXPECT_EQ(short_seq.full, 25);
  EXPECT_EQ(short_seq.sliding, 7);
  EXPECT_EQ(split_kv_budget(0, g, 1024).full, 0);
}

TEST(KvGroups, NumKvBlocksSetsTheFullPool) {
  const KvGroupShape g = gemma_like();
  // 640 full blocks hold 10 sequences of 1024 tokens: 50 + 4 sliding blocks.
  EXPECT_EQ(kv_pools_for_blocks(640, g, 1024).full, 640);
  EXPECT_EQ(kv_pools_for_blocks(640, g, 1024).sliding, 54);
  EXPECT_EQ(kv_pools_for_blocks(100, g, 1024).sliding, 12);  // ceil(100 x 5 / 64) + 4
  // Fewer blocks than one sequence: the sequence they hold (48 tokens = 3 blocks).
  EXPECT_EQ(kv_pools_for_blocks(3, g, 1024).sliding, 7);
  KvGroupShape none = g;
  none.window = 0;
  EXPECT_EQ(kv_pools_for_blocks(640, none, 1024).sliding, 0);
}

}  // namespace
}  // namespace pagoda
