#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"

namespace pagoda {
namespace {

TEST(Half, Bf16RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
      continue;
    }
    EXPECT_EQ(float_to_bf16(f), h) << h;
  }
}

TEST(Half, Fp16RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f))));
      continue;
    }
    EXPECT_EQ(float_to_fp16(f), h) << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256.0f), float_to_bf16(1.0f));  // tie -> even
  EXPECT_EQ(fp16_to_float(float_to_fp16(65520.0f)), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_float(float_to_fp16(65519.0f)), 65504.0f);
  EXPECT_EQ(fp16_to_float(float_to_fp16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_float(float_to_fp16(std::ldexp(1.0f, -25))), 0.0f);  // tie -> even (0)
  EXPECT_EQ(fp16_to_float(float_to_fp16(std::ldexp(1.5f, -25))), std::ldexp(1.0f, -24));
}

}  // namespace
}  // namespace pagoda
