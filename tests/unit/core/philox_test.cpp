#include <gtest/gtest.h>

#include <cmath>

#include "core/philox.h"

namespace pagoda {
namespace {

// Known-answer test from the Random123 distribution (kat_vectors):
// philox4x32_10 with counter {0,0,0,0}, key {0,0} -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
TEST(Philox, KnownAnswer) {
  Philox4 r = philox4x32(Philox4{{0, 0, 0, 0}}, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
}

TEST(Philox, UniformInRangeAndMeanHalf) {
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    float u = philox_uniform(42, 7, static_cast<uint64_t>(i));
    ASSERT_GT(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NE(philox_uniform(1, 0, 0), philox_uniform(2, 0, 0));
  // The extremes of the 23-bit grid stay strictly inside (0, 1).
  EXPECT_GT((0.0f + 0.5f) * (1.0f / 8388608.0f), 0.0f);
  EXPECT_LT((8388607.0f + 0.5f) * (1.0f / 8388608.0f), 1.0f);
  EXPECT_NE(philox_uniform(1, 0, 0), philox_uniform(1, 1, 0));
}

}  // namespace
}  // namespace pagoda
