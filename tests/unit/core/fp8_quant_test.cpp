// core/fp8_quant.h: the scale rules (vLLM's guards) and quantisation.
#include "core/fp8_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace pagoda {
namespace {

TEST(Fp8Quant, TokenScaleIsAmaxOver448WithAFloor) {
  EXPECT_EQ(fp8_token_scale(448.0f), 1.0f);
  EXPECT_EQ(fp8_token_scale(1.0f), 1.0f / 448.0f);
  EXPECT_EQ(fp8_token_scale(0.0f), 1.0f / (448.0f * 512.0f));
  EXPECT_EQ(fp8_token_scale(1e-6f), 1.0f / (448.0f * 512.0f));
}

TEST(Fp8Quant, GroupScaleFloorsTheAmax) {
  EXPECT_EQ(fp8_group_scale(448.0f), 1.0f);
  EXPECT_EQ(fp8_group_scale(0.0f), 1e-10f / 448.0f);
}

TEST(Fp8Quant, AmaxIgnoresNaNAndSign) {
  const std::vector<float> x = {1.0f, -3.5f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  EXPECT_EQ(fp8_amax(x.data(), static_cast<int64_t>(x.size())), 3.5f);
  EXPECT_EQ(fp8_amax(x.data(), 0), 0.0f);
}

TEST(Fp8Quant, QuantizeDividesThenRoundsAndSaturates) {
  const std::vector<float> x = {2.0f, 1000.0f, -0.53f, 0.0f};
  std::vector<uint8_t> q(x.size());
  fp8_quantize(x.data(), static_cast<int64_t>(x.size()), 0.25f, q.data());
  EXPECT_EQ(e4m3_to_float(q[0]), 8.0f);
  EXPECT_EQ(e4m3_to_float(q[1]), 448.0f);  // 4000 saturates
  EXPECT_EQ(e4m3_to_float(q[2]), -2.0f);   // -2.12 rounds to -2 (step 0.25 in [2, 4))
  EXPECT_EQ(e4m3_to_float(q[3]), 0.0f);
  const float* table = e4m3_value_table();
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(table[b]));
    } else {
      EXPECT_EQ(table[b], e4m3_to_float(static_cast<uint8_t>(b)));
    }
  }
}

}  // namespace
}  // namespace pagoda
