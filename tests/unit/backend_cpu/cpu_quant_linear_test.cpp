// linear with a block-dtype weight (core/dtype.h) against dequantizing the
// weight with core/block_dequant.h and running the f32 linear: bit-identical
// for every format, on random blocks over odd shapes.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/block_dequant.h"
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

}  // namespace
}  // namespace pagoda
