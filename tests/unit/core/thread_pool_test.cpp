#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/thread_pool.h"

namespace pagoda {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int64_t n : {1, 2, 3, 17, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    parallel_for(n, 7, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, NestedCallsRunInline) {
  std::atomic<int64_t> total{0};
  parallel_for(8, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      parallel_for(10, 1, [&](int64_t a, int64_t b) { total += b - a; });
  });
  EXPECT_EQ(total.load(), 80);
}

}  // namespace
}  // namespace pagoda
