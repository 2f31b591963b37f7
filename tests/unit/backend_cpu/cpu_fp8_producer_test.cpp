// The FP8 producer ops (backend.h rms_norm_fp8, add_rms_norm_fp8,
// silu_mul_fp8, linear_fp8_rows) against their op-by-op composition on
// random data: the same output, codes and scales as core/fp8_quant.h gives
// on that output, and linear_fp8_rows bit-equal to linear() on the
// activation the codes came from.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/fp8.h"
#include "core/fp8_quant.h"
#include "test_util.h"

namespace pagoda {
namespace {

using test::f32;
using test::Rng;

// Codes and scales of [t, k], poisoned (0xff / NaN) so unwritten entries show.
struct Rows {
  Rows(int64_t t, int64_t k)
      : t(t), k(k), codes(static_cast<size_t>(t * k), 0xff), scales(test::nan_filled(t)) {}
  Fp8Rows view() {
    return {Tensor(codes.data(), DType::kF8E4M3, {t, k}), f32(scales, {t})};
  }
  int64_t t, k;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

// a's codes and scales by core/fp8_quant.h, row by row.
void expect_quantised(const std::vector<float>& a, const Rows& q) {
  for (int64_t r = 0; r < q.t; ++r) {
    const float* row = a.data() + r * q.k;
    const float s = fp8_token_scale(fp8_amax(row, q.k));
    ASSERT_EQ(q.scales[static_cast<size_t>(r)], s) << "row " << r;
    std::vector<uint8_t> want(static_cast<size_t>(q.k));
    fp8_quantize(row, q.k, s, want.data());
    ASSERT_EQ(0, std::memcmp(want.data(), q.codes.data() + r * q.k, want.size())) << "row " << r;
  }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CpuFp8Producer, NormsEqualTheirCompositionAndItsQuantisation) {
  CpuBackend be;
  Rng rng(11);
  for (int64_t t : {1, 3, 17, 70}) {
    for (int64_t k : {1, 7, 64, 130}) {
      SCOPED_TRACE("t=" + std::to_string(t) + " k=" + std::to_string(k));
      std::vector<float> x = rng.floats(static_cast<size_t>(t * k), -3.0f, 3.0f);
      std::vector<float> res = rng.floats(x.size(), -3.0f, 3.0f);
      std::vector<float> w = rng.floats(static_cast<size_t>(k), 0.5f, 2.0f);
      if (t > 1) std::fill(x.begin(), x.begin() + k, 0.0f);  // a zero row: the minimum scale
      // rms_norm_fp8
      std::vector<float> want = test::nan_filled(x.size()), got = want;
      Tensor wo = f32(want, {t, k}), go = f32(got, {t, k});
      be.rms_norm(f32(x, {t, k}), f32(w, {k}), 1e-5f, wo);
      Rows q(t, k);
      Fp8Rows qv = q.view();
      be.rms_norm_fp8(f32(x, {t, k}), f32(w, {k}), 1e-5f, go, qv);
      EXPECT_TRUE(same_bits(want, got));
      expect_quantised(got, q);
      // add_rms_norm_fp8
      std::vector<float> res_want = res, res_got = res;
      Tensor rw = f32(res_want, {t, k}), rg = f32(res_got, {t, k});
      be.add_rms_norm(rw, f32(x, {t, k}), f32(w, {k}), 1e-5f, wo);
      Rows q2(t, k);
      Fp8Rows q2v = q2.view();
      be.add_rms_norm_fp8(rg, f32(x, {t, k}), f32(w, {k}), 1e-5f, go, q2v);
      EXPECT_TRUE(same_bits(res_want, res_got));
      EXPECT_TRUE(same_bits(want, got));
      expect_quantised(got, q2);
    }
  }
}

TEST(CpuFp8Producer, SiluMulEqualsItsCompositionAndItsQuantisation) {
  CpuBackend be;
  Rng rng(12);
  for (int64_t t : {1, 5, 33}) {
    for (int64_t inter : {1, 9, 48, 200}) {
      SCOPED_TRACE("t=" + std::to_string(t) + " inter=" + std::to_string(inter));
      std::vector<float> gu = rng.floats(static_cast<size_t>(t * 2 * inter), -4.0f, 4.0f);
      std::vector<float> want = test::nan_filled(static_cast<size_t>(t * inter)), got = want;
      Tensor wo = f32(want, {t, inter}), go = f32(got, {t, inter});
      be.silu_mul(f32(gu, {t, 2 * inter}), wo);
      Rows q(t, inter);
      Fp8Rows qv = q.view();
      be.silu_mul_fp8(f32(gu, {t, 2 * inter}), go, qv);
      EXPECT_TRUE(same_bits(want, got));
      expect_quantised(got, q);
    }
  }
}

TEST(CpuFp8Producer, LinearFromRowsEqualsLinearBitForBit) {
  CpuBackend be;
  Rng rng(13);
  for (int64_t t : {1, 2, 9, 65, 130}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {64, 48}, {70, 129}}) {
      for (bool bias : {false, true}) {
        SCOPED_TRACE("t=" + std::to_string(t) + " n=" + std::to_string(n) +
                     " k=" + std::to_string(k) + (bias ? " bias" : ""));
        std::vector<uint8_t> codes(static_cast<size_t>(n * k));
        for (uint8_t& c : codes) {
          c = static_cast<uint8_t>(rng.randint(0, 255));
          if ((c & 0x7f) == 0x7f) c = 0;  // no NaN codes
        }
        std::vector<float> ws = rng.floats(static_cast<size_t>(n), 0.001f, 0.01f);
        LinearWeight w(Tensor(codes.data(), DType::kF8E4M3, {n, k}));
        w.weight_scale = f32(ws, {n});
        std::vector<float> b = rng.floats(static_cast<size_t>(n));
        std::vector<float> x = rng.floats(static_cast<size_t>(t * k), -5.0f, 5.0f);
        std::vector<float> want = test::nan_filled(static_cast<size_t>(t * n)), got = want;
        Tensor wo = f32(want, {t, n}), go = f32(got, {t, n});
        const Tensor bt = bias ? f32(b, {n}) : Tensor();
        be.linear(f32(x, {t, k}), w, bt, wo);
        // The rows as a producer leaves them: x's own codes (a norm with w = 1 would differ).
        Rows q(t, k);
        for (int64_t r = 0; r < t; ++r) {
          const float s = fp8_token_scale(fp8_amax(x.data() + r * k, k));
          q.scales[static_cast<size_t>(r)] = s;
          fp8_quantize(x.data() + r * k, k, s, q.codes.data() + r * k);
        }
        be.linear_fp8_rows(q.view(), w, bt, go);
        EXPECT_TRUE(same_bits(want, got));
      }
    }
  }
}

}  // namespace
}  // namespace pagoda
