#include "model/kv_budget.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

constexpr int64_t kBlockBytes = 4096;  // one block of 16 tokens
constexpr size_t kGiB = size_t{1} << 30;

TEST(CpuKvBudget, HoldsMaxNumSeqsFullLengthSequences) {
  // 8 sequences x ceil(100 / 16) = 7 blocks each.
  KvBudget b = cpu_kv_budget(kBlockBytes, 16, 100, 8, 64 * kGiB);
  EXPECT_EQ(b.bytes, 8 * 7 * kBlockBytes);
  EXPECT_EQ(b.how, "room for 8 seqs x 100 tokens");
  // Twice the sequences or twice the length: twice the pool.
  EXPECT_EQ(cpu_kv_budget(kBlockBytes, 16, 100, 16, 64 * kGiB).bytes, 2 * b.bytes);
  EXPECT_EQ(cpu_kv_budget(kBlockBytes, 16, 224, 8, 64 * kGiB).bytes, 2 * b.bytes);
}

TEST(CpuKvBudget, TakesAtMostHalfTheAvailableMemory) {
  // 256 seqs x 512 blocks of 4 KiB = 512 MiB wanted, of 512 MiB available.
  const size_t available = 512u << 20;
  KvBudget b = cpu_kv_budget(kBlockBytes, 16, 8192, 256, available);
  EXPECT_EQ(b.bytes, kCpuKvAvailableFraction * available);
  EXPECT_EQ(b.how,
            "room for 256 seqs x 8192 tokens would take 0.50 GiB; capped at 50% of the 0.50 GiB of "
            "memory "
            "available");
  // Unknown available memory: capped at 1 GiB.
  KvBudget unknown = cpu_kv_budget(kBlockBytes, 16, 8192, 1024, 0);
  EXPECT_EQ(unknown.bytes, kCpuKvFallbackBytes);
  EXPECT_NE(unknown.how.find("memory available unknown"), std::string::npos) << unknown.how;
  EXPECT_EQ(cpu_kv_budget(kBlockBytes, 16, 16, 1, 0).bytes, kBlockBytes);  // small wins
}

TEST(CpuKvBudget, RanksOfOneProcessShareTheCap) {
  const size_t available = 512u << 20;  // cap 256 MiB, of 512 MiB wanted
  KvBudget four = cpu_kv_budget(kBlockBytes, 16, 8192, 256, available, 4);
  EXPECT_EQ(four.bytes, kCpuKvAvailableFraction * available / 4);
  EXPECT_NE(four.how.find("capped at 50% of the 0.50 GiB of memory available, shared by 4 ranks"),
            std::string::npos)
      << four.how;
  // What fits under each rank's share is taken whole.
  EXPECT_EQ(cpu_kv_budget(kBlockBytes, 16, 16, 1, available, 4).bytes, kBlockBytes);
}

TEST(ExplicitKvBudget, IsTheGivenSize) {
  KvBudget b = explicit_kv_budget(int64_t{3} << 29);
  EXPECT_EQ(b.bytes, 1.5 * kGiB);
  EXPECT_EQ(b.how, "--kv-cache-memory-bytes 1.50 GiB");
  EXPECT_EQ(explicit_kv_budget(int64_t{5} << 19).how, "--kv-cache-memory-bytes 2.5 MiB");
}

}  // namespace
}  // namespace pagoda
