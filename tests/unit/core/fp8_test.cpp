#include "core/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

namespace pagoda {
namespace {

TEST(Fp8Test, DecodesTheFormatsCorners) {
  EXPECT_EQ(e4m3_to_float(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(e4m3_to_float(0x80)));
  EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f);   // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(e4m3_to_float(0x08), 0x1p-6f);   // smallest normal
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
  EXPECT_EQ(e4m3_to_float(0x78), 256.0f);  // exponent 15 is finite except mantissa 7
}

TEST(Fp8Test, EveryCodeRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const float f = e4m3_to_float(static_cast<uint8_t>(b));
    if (std::isnan(f)) continue;
    if (b == 0x80) {
      EXPECT_EQ(float_to_e4m3(f), 0x80);
      continue;
    }
    EXPECT_EQ(float_to_e4m3(f), b) << "code " << b;
  }
}

TEST(Fp8Test, SaturatesAndKeepsNan) {
  EXPECT_EQ(float_to_e4m3(449.0f), 0x7e);
  EXPECT_EQ(float_to_e4m3(1e30f), 0x7e);
  EXPECT_EQ(float_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_e4m3(NAN), 0x7f);
}

TEST(Fp8Test, RoundsToNearestEvenAtEveryMidpoint) {
  // Between consecutive finite codes b and b+1 (same sign), the midpoint goes
  // to the code with an even mantissa; anything off the midpoint to the nearer.
  for (int b = 0; b < 0x7e; ++b) {
    const float lo = e4m3_to_float(static_cast<uint8_t>(b));
    const float hi = e4m3_to_float(static_cast<uint8_t>(b + 1));
    const float mid = (lo + hi) / 2;  // exact in float
    const int even = (b % 2 == 0) ? b : b + 1;
    EXPECT_EQ(float_to_e4m3(mid), even) << "between " << b << " and " << b + 1;
    EXPECT_EQ(float_to_e4m3(-mid), 0x80 | even);
    EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 0.0f)), b);
    EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 1000.0f)), b + 1);
  }
}

TEST(Fp8Test, ErrorWithinHalfAQuantumOnRandomValues) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-12.0f, 9.5f);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::exp2(exponent(rng)) * ((i & 1) ? -1.0f : 1.0f);
    const float y = e4m3_to_float(float_to_e4m3(x));
    const float ax = std::fabs(x);
    if (ax >= 448.0f) {
      EXPECT_EQ(std::fabs(y), 448.0f);
      continue;
    }
    const float quantum = ax < 0x1p-6f ? 0x1p-9f : std::ldexp(1.0f, std::ilogb(ax) - 3);
    EXPECT_LE(std::fabs(y - x), quantum / 2) << x;
  }
}

}  // namespace
}  // namespace pagoda
