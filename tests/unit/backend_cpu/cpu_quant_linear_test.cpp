// linear with a block-dtype weight (core/dtype.h) against dequantizing the
// weight with core/block_dequant.h and running the f32 linear: bit-identical
// for every format (GGUF's and the AWQ / GPTQ group formats), on random
// blocks over odd shapes; the _perm group formats gather x by their
// permutation of K.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/block_dequant.h"
#include "core/half.h"
#include "random_blocks.h"
#include "test_util.h"

namespace pagoda {
namespace {

using test::f32;
using test::Rng;

TEST(CpuQuantLinear, EqualsDequantizeThenLinear) {
  CpuBackend be;
  Rng rng(21);
  const std::vector<int> rows = {1, 2, 3, 8, 9, 64, 65, 130};
  const std::vector<int> ns = {1, 3, 5, 63, 64, 65, 131, 200};
  for (DType t : test::block_dtypes()) {
    const int64_t block = dtype_block_elems(t);
    for (int iter = 0; iter < 8; ++iter) {
      const int64_t rows_t = rng.pick(rows), n = rng.pick(ns);
      const int64_t k = block * rng.randint(1, block == 32 ? 12 : 3);
      const bool with_bias = rng.randint(0, 1) == 1;
      std::vector<uint8_t> wq = test::random_blocks(t, n * k / block, rng.engine());
      std::vector<float> w(static_cast<size_t>(n * k));
      dequantize_blocks(t, wq.data(), n * k, w.data());
      std::vector<float> x = rng.floats(static_cast<size_t>(rows_t * k));
      std::vector<float> b = with_bias ? rng.floats(static_cast<size_t>(n)) : std::vector<float>{};
      std::vector<float> got = test::nan_filled(static_cast<size_t>(rows_t * n)), want = got;
      Tensor og = f32(got, {rows_t, n}), ow = f32(want, {rows_t, n});
      const Tensor bias = with_bias ? f32(b, {n}) : Tensor();
      be.linear(f32(x, {rows_t, k}), Tensor(wq.data(), t, {n, k}), bias, og);
      be.linear(f32(x, {rows_t, k}), f32(w, {n, k}), bias, ow);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << dtype_name(t) << " rows " << rows_t << " n " << n << " k " << k;
    }
  }
}

// The weights really are read as blocks: flipping bits of row 3's bytes, one
// byte at a time, changes row 3's output (and only it).
TEST(CpuQuantLinear, ReadsEveryRowsBlocks) {
  CpuBackend be;
  Rng rng(22);
  for (DType t : test::block_dtypes()) {
    const int64_t k = dtype_block_elems(t) * 2, n = 5;
    std::vector<uint8_t> wq = test::random_blocks(t, n * 2, rng.engine());
    std::vector<float> x(static_cast<size_t>(k), 1.0f);
    std::vector<float> before(static_cast<size_t>(n)), after(static_cast<size_t>(n));
    Tensor ob = f32(before, {1, n}), oa = f32(after, {1, n});
    be.linear(f32(x, {1, k}), Tensor(wq.data(), t, {n, k}), Tensor(), ob);
    const size_t row3 = 3 * 2 * dtype_block_bytes(t);
    bool changed = false;
    for (size_t byte = 0; byte < 2 * dtype_block_bytes(t) && !changed; ++byte) {
      wq[row3 + byte] ^= 0x11;
      be.linear(f32(x, {1, k}), Tensor(wq.data(), t, {n, k}), Tensor(), oa);
      changed = after[3] != before[3];
      wq[row3 + byte] ^= 0x11;
    }
    EXPECT_TRUE(changed) << dtype_name(t);
    for (int c : {0, 1, 2, 4}) EXPECT_EQ(after[c], before[c]) << dtype_name(t);
  }
}

// A _perm group format: the linear equals the f32 linear of the stored
// (permuted) dequantized rows with x's columns gathered by the permutation,
// x[:, perm] @ stored^T (to f32 rounding: the sums run in another order), and
// is bit-identical to the f32 linear of dequantize_weight_rows' logical rows.
TEST(CpuQuantLinear, PermutedGroupFormatsGatherX) {
  CpuBackend be;
  Rng rng(23);
  for (DType t : test::k_perm_dtypes()) {
    const int64_t block = dtype_block_elems(t);
    for (int iter = 0; iter < 4; ++iter) {
      const int64_t rows_t = rng.pick(std::vector<int>{1, 3, 8, 65}), n = rng.randint(1, 70);
      const int64_t k = block * rng.randint(1, 4);
      std::vector<uint8_t> wq = test::random_weight(t, n, k, rng.engine());
      const Tensor w(wq.data(), t, {n, k});
      const int32_t* perm = w.k_perm();
      std::vector<float> stored(static_cast<size_t>(n * k)), logical(stored.size());
      dequantize_blocks(t, wq.data(), n * k, stored.data());
      dequantize_weight_rows(t, wq.data(), n, k, 0, n, logical.data());
      std::vector<float> x = rng.floats(static_cast<size_t>(rows_t * k)), xp(x.size());
      for (int64_t r = 0; r < rows_t; ++r)
        for (int64_t i = 0; i < k; ++i) xp[r * k + i] = x[r * k + perm[i]];
      std::vector<float> got(static_cast<size_t>(rows_t * n)), gathered(got.size()),
          want(got.size());
      Tensor og = f32(got, {rows_t, n}), o1 = f32(gathered, {rows_t, n}),
             o2 = f32(want, {rows_t, n});
      be.linear(f32(x, {rows_t, k}), w, Tensor(), og);
      be.linear(f32(xp, {rows_t, k}), f32(stored, {n, k}), Tensor(), o1);
      be.linear(f32(x, {rows_t, k}), f32(logical, {n, k}), Tensor(), o2);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << dtype_name(t);
      for (size_t i = 0; i < got.size(); ++i) {
        float scale = 0;
        for (int64_t j = 0; j < k; ++j)
          scale += std::fabs(xp[(i / n) * k + j] * stored[(i % n) * k + j]);
        ASSERT_NEAR(got[i], gathered[i], 1e-5f * scale + 1e-30f) << dtype_name(t) << " i " << i;
      }
    }
  }
}

// A group block is (q - z) * s: s f16 at byte 0, z u16 at byte 2, quants
// from byte 4 (4-bit: element 2j low nibble of byte j, 2j + 1 high nibble).
TEST(CpuQuantLinear, GroupBlockLayout) {
  std::vector<uint8_t> b4(dtype_block_bytes(DType::kW4G32), 0);
  const uint16_t s = float_to_fp16(0.5f), z4 = 3;
  std::memcpy(b4.data(), &s, 2);
  std::memcpy(b4.data() + 2, &z4, 2);
  b4[4] = 0xA1;   // elements 0 (1) and 1 (10)
  b4[19] = 0x0F;  // element 30 (15), 31 (0)
  std::vector<float> y(32);
  dequantize_blocks(DType::kW4G32, b4.data(), 32, y.data());
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 3.5f);
  EXPECT_EQ(y[2], -1.5f);
  EXPECT_EQ(y[30], 6.0f);
  EXPECT_EQ(y[31], -1.5f);
  std::vector<uint8_t> b8(dtype_block_bytes(DType::kW8G32), 0);
  const uint16_t z8 = 256;  // GPTQ v1's 255 + 1
  std::memcpy(b8.data(), &s, 2);
  std::memcpy(b8.data() + 2, &z8, 2);
  b8[4 + 7] = 200;
  dequantize_blocks(DType::kW8G32, b8.data(), 32, y.data());
  EXPECT_EQ(y[7], -28.0f);
  EXPECT_EQ(y[0], -128.0f);
}

}  // namespace
}  // namespace pagoda
