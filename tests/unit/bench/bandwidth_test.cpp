#include "bench/bandwidth.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace pagoda::bench {
namespace {

TEST(Bandwidth, CountsReadPlusWrittenBytesOverTheBestTime) {
  // A "copy" that takes 20 ms for 1 MB moves 2 MB (read + written) per 20 ms.
  int calls = 0;
  auto r =
      measure_copy_bandwidth([](size_t n) { return std::malloc(n); }, [](void* p) { std::free(p); },
                             [&](void* d, const void* s, size_t n) {
                               ++calls;
                               std::memcpy(d, s, n);
                               std::this_thread::sleep_for(std::chrono::milliseconds(20));
                             },
                             1000000, 3, "fake");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 4);  // one warm-up + 3 timed
  EXPECT_NEAR(r->bytes_per_s, 2e6 / 0.020, 2e6 / 0.020 * 0.15);
  EXPECT_EQ(r->method, "fake");
}

TEST(Bandwidth, AllocationFailureIsAnError) {
  auto r = measure_copy_bandwidth([](size_t) -> void* { return nullptr; }, [](void*) {},
                                  [](void*, const void*, size_t) {}, 100, 1, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_FALSE(measure_copy_bandwidth(
                   std::malloc, std::free, [](void*, const void*, size_t) {}, 0, 1, "x")
                   .ok());
}

TEST(Bandwidth, HostMemcpyIsPlausible) {
  auto r = measure_host_bandwidth(size_t{32} << 20, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->bytes_per_s, 1e8);   // any machine copies more than 100 MB/s
  EXPECT_LT(r->bytes_per_s, 1e13);  // and less than 10 TB/s
  EXPECT_NE(r->method.find("memcpy"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::bench
