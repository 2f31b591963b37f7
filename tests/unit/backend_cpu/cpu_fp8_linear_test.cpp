// linear with an FP8 W8A8 weight (backend/linear_weight.h): hand-checked
// cases for each scale layout and activation scheme, then random shapes
// against a plain scalar transcription of the header's formulas (double
// sums, so only the f32 summation order differs).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "core/fp8.h"
#include "core/fp8_quant.h"
#include "test_util.h"

namespace pagoda {
namespace {

using test::f32;
using test::Rng;

struct Fp8Case {
  int64_t n = 0, k = 0;
  std::vector<uint8_t> codes;  // [n, k]
  std::vector<float> scales;   // [n], or the block grid
  std::vector<float> input_scale;
  int32_t block = 0;

  LinearWeight weight() {
    LinearWeight w(Tensor(codes.data(), DType::kF8E4M3, {n, k}));
    const int64_t nb = block > 0 ? (n + block - 1) / block : n;
    const int64_t kb = block > 0 ? (k + block - 1) / block : 1;
    w.weight_scale = block > 0 ? Tensor(scales.data(), DType::kF32, {nb, kb})
                               : Tensor(scales.data(), DType::kF32, {n});
    if (!input_scale.empty()) w.input_scale = Tensor(input_scale.data(), DType::kF32, {1});
    w.block = block;
    return w;
  }
};

std::vector<float> run(Fp8Case& c, std::vector<float> x, const std::vector<float>& bias = {}) {
  CpuBackend be;
  const int64_t t = static_cast<int64_t>(x.size()) / c.k;
  std::vector<float> out = test::nan_filled(static_cast<size_t>(t * c.n));
  std::vector<float> b = bias;
  Tensor o = f32(out, {t, c.n});
  be.linear(f32(x, {t, c.k}), c.weight(), b.empty() ? Tensor() : f32(b, {c.n}), o);
  return out;
}

// w = [[1, 2], [-0.5, 4]] (exact e4m3 codes), per-row scales 0.5 and 2.
Fp8Case two_by_two() {
  Fp8Case c;
  c.n = 2;
  c.k = 2;
  c.codes = {float_to_e4m3(1.0f), float_to_e4m3(2.0f), float_to_e4m3(-0.5f), float_to_e4m3(4.0f)};
  c.scales = {0.5f, 2.0f};
  return c;
}

TEST(CpuFp8Linear, DynamicPerTokenByHand) {
  Fp8Case c = two_by_two();
  // Row 0 [448, 224]: s = 1, x_q = x. Row 1 [0.5, -1]: s = 1/448, x_q = [224, -448].
  const std::vector<float> y = run(c, {448.0f, 224.0f, 0.5f, -1.0f}, {1.0f, -1.0f});
  EXPECT_FLOAT_EQ(y[0], (448.0f + 448.0f) * 1.0f * 0.5f + 1.0f);
  EXPECT_FLOAT_EQ(y[1], (-224.0f + 896.0f) * 1.0f * 2.0f - 1.0f);
  EXPECT_FLOAT_EQ(y[2], (224.0f - 896.0f) * (1.0f / 448.0f) * 0.5f + 1.0f);
  EXPECT_FLOAT_EQ(y[3], (-112.0f - 1792.0f) * (1.0f / 448.0f) * 2.0f - 1.0f);
}

TEST(CpuFp8Linear, ZeroRowUsesTheMinimumScale) {
  Fp8Case c = two_by_two();
  const std::vector<float> y = run(c, {0.0f, 0.0f});
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(fp8_token_scale(0.0f), 1.0f / (448.0f * 512.0f));
}

TEST(CpuFp8Linear, ActivationsAreRoundedToE4M3) {
  Fp8Case c = two_by_two();
  // Row [448, 1.06]: s = 1; 1.06 rounds to 1.0 (e4m3 step 0.125 near 1).
  const std::vector<float> y = run(c, {448.0f, 1.06f});
  EXPECT_FLOAT_EQ(y[0], (448.0f + 2.0f) * 0.5f);
}

TEST(CpuFp8Linear, StaticScaleSaturates) {
  Fp8Case c = two_by_two();
  c.input_scale = {0.25f};
  // x / 0.25 = [8, 4000 -> 448 (saturated)].
  const std::vector<float> y = run(c, {2.0f, 1000.0f});
  EXPECT_FLOAT_EQ(y[0], (8.0f + 896.0f) * 0.25f * 0.5f);
  EXPECT_FLOAT_EQ(y[1], (-4.0f + 1792.0f) * 0.25f * 2.0f);
}

TEST(CpuFp8Linear, BlockScalesPerTokenGroup) {
  // n = 3, k = 3, block 2: column groups {0, 1} and {2}, row blocks {0, 1}, {2}.
  Fp8Case c;
  c.n = 3;
  c.k = 3;
  c.block = 2;
  c.codes.assign(9, float_to_e4m3(1.0f));
  c.scales = {1.0f, 2.0f,   // rows 0-1: groups 0, 1
              3.0f, 4.0f};  // row 2
  // Group 0 [448, 448]: s = 1; group 1 [0.5]: s = 0.5/448, x_q = 448.
  const std::vector<float> y = run(c, {448.0f, 448.0f, 0.5f});
  const float g1 = 448.0f * (0.5f / 448.0f);
  EXPECT_FLOAT_EQ(y[0], 896.0f * 1.0f * 1.0f + g1 * 2.0f);
  EXPECT_FLOAT_EQ(y[1], 896.0f * 1.0f * 1.0f + g1 * 2.0f);
  EXPECT_FLOAT_EQ(y[2], 896.0f * 1.0f * 3.0f + g1 * 4.0f);
}

// The header's formulas, literally, with double sums; *mag gets each
// output's sum of |terms| (the scale of f32 rounding).
std::vector<double> reference(const Fp8Case& c, const std::vector<float>& x, int64_t t,
                              std::vector<double>* mag) {
  const int64_t width = c.block > 0 ? c.block : c.k;
  const int64_t groups = (c.k + width - 1) / width;
  const int64_t kb = c.block > 0 ? groups : 1;
  std::vector<double> y(static_cast<size_t>(t * c.n), 0.0);
  mag->assign(y.size(), 0.0);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t lo = g * width, hi = std::min(c.k, lo + width);
      float amax = 0.0f;
      for (int64_t j = lo; j < hi; ++j) amax = std::max(amax, std::fabs(x[r * c.k + j]));
      const float s = c.block > 0              ? std::max(amax, 1e-10f) / 448.0f
                      : !c.input_scale.empty() ? c.input_scale[0]
                                               : std::max(amax / 448.0f, 1.0f / (448.0f * 512.0f));
      for (int64_t n = 0; n < c.n; ++n) {
        double acc = 0.0, abs_acc = 0.0;
        for (int64_t j = lo; j < hi; ++j) {
          const double p = static_cast<double>(e4m3_to_float(float_to_e4m3(x[r * c.k + j] / s))) *
                           e4m3_to_float(c.codes[n * c.k + j]);
          acc += p;
          abs_acc += std::fabs(p);
        }
        const float ws = c.block > 0 ? c.scales[(n / c.block) * kb + g] : c.scales[n];
        y[r * c.n + n] += acc * s * ws;
        (*mag)[r * c.n + n] += abs_acc * s * ws;
      }
    }
  }
  return y;
}

TEST(CpuFp8Linear, RandomShapesMatchTheFormulas) {
  Rng rng(8);
  const std::vector<int> ts = {1, 2, 5, 8, 16, 70};
  const std::vector<int> ns = {1, 7, 64, 65, 130};
  const std::vector<int> ks = {1, 16, 100, 128, 200, 257};
  for (int iter = 0; iter < 60; ++iter) {
    Fp8Case c;
    const int64_t t = rng.pick(ts);
    c.n = rng.pick(ns);
    c.k = rng.pick(ks);
    const int mode = iter % 3;  // dynamic per token, static, block
    c.block = mode == 2 ? rng.pick(std::vector<int>{16, 32, 128}) : 0;
    for (int64_t i = 0; i < c.n * c.k; ++i) {
      uint8_t b = static_cast<uint8_t>(rng.randint(0, 255));
      if ((b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes
      c.codes.push_back(b);
    }
    const int64_t num_scales =
        c.block > 0 ? ((c.n + c.block - 1) / c.block) * ((c.k + c.block - 1) / c.block) : c.n;
    c.scales = rng.floats(static_cast<size_t>(num_scales), 1e-4f, 1e-2f);
    if (mode == 1) c.input_scale = {rng.uniform(0.004f, 0.01f)};
    std::vector<float> x = rng.floats(static_cast<size_t>(t * c.k), -3.0f, 3.0f);
    const std::vector<float> got = run(c, x);
    std::vector<double> mag;
    const std::vector<double> want = reference(c, x, t, &mag);
    for (size_t i = 0; i < got.size(); ++i) {
      const double tol = 2e-5 * mag[i] + 1e-12;
      ASSERT_NEAR(got[i], want[i], tol) << "t " << t << " n " << c.n << " k " << c.k << " mode "
                                        << mode << " block " << c.block << " at " << i;
    }
  }
}

TEST(CpuFp8Linear, BatchInvariant) {
  // A row's output does not depend on the other rows (per-token scales).
  Rng rng(9);
  Fp8Case c;
  c.n = 33;
  c.k = 77;
  for (int64_t i = 0; i < c.n * c.k; ++i) c.codes.push_back(float_to_e4m3(rng.uniform()));
  c.scales = rng.floats(static_cast<size_t>(c.n), 0.01f, 0.1f);
  std::vector<float> x = rng.floats(static_cast<size_t>(9 * c.k));
  const std::vector<float> all = run(c, x);
  const std::vector<float> row4 =
      run(c, std::vector<float>(x.begin() + 4 * c.k, x.begin() + 5 * c.k));
  for (int64_t n = 0; n < c.n; ++n) EXPECT_EQ(all[4 * c.n + n], row4[n]);
}

}  // namespace
}  // namespace pagoda
