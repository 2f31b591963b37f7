// The 4-bit tile layout (backend/cuda/w4_tiles.h): CudaBackend::
// prepare_block_weight repacks w4g32 / w4g64 / w4g128 (and _perm) weights
// with N % 16 == 0 and K % 64 == 0, and linear() reads them through the tile
// decode kernel (T 1..32, w4_tile_gemv.cu) or the tile dequantization (more
// rows). Checked: the repacked bytes against the layout's formula computed
// here on the host; linear() against the CPU backend on the row-of-blocks
// bytes for every format, bf16 / f16, T = 1..8 and 12 / 16 / 24 / 32, N 16,
// 48, 4112, K 64, 192, 4096 (those that are whole groups), bias, f32 out;
// a view of whole tiles (a fused weight's part); T 40 and 200 (dequantized);
// each decode kernel (v1, v2) launched directly on v2's loop edges;
// a weight that must stay in blocks (N % 16 != 0, and with the repack off);
// deallocate forgetting a weight; graph replay.
//
// Tolerance: as group_quant_linear_test.cpp (the compute dtype's; f32
// output of the decode kernel at half of it).
#include "backend/cuda/w4_tiles.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "random_blocks.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

const DType kW4Formats[] = {DType::kW4G32,     DType::kW4G64,     DType::kW4G128,
                            DType::kW4G32Perm, DType::kW4G64Perm, DType::kW4G128Perm};

std::string name_of(DType t) {
  return std::string(dtype_name(t));
}

struct Weight {
  Weight(Backend& backend, DType t, int64_t n, int64_t k, const std::vector<uint8_t>& host)
      : buffer(&backend, host.size()), tensor(buffer.data(), t, {n, k}) {
    backend.copy_to_device(buffer.data(), host.data(), host.size());
    backend.synchronize();
    const Status st = backend.prepare_block_weight(tensor);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  }
  DeviceBuffer buffer;
  Tensor tensor;
};

// The tile layout of the row-of-blocks bytes of a weight [n, k] of t (its
// N rows; a _perm permutation after them is not part of it), from the
// formula of w4_tiles.h.
std::vector<uint8_t> host_tiles(DType t, int64_t n, int64_t k, const std::vector<uint8_t>& b) {
  const int64_t g_elems = dtype_block_elems(t), block_bytes = 4 + g_elems / 2;
  const size_t row_bytes = dtype_nbytes(t, k), tile_bytes = 16 * row_bytes;
  auto nibble = [&](int64_t row, int64_t col) {
    const uint8_t byte =
        b[row * row_bytes + (col / g_elems) * block_bytes + 4 + (col % g_elems) / 2];
    return static_cast<uint32_t>((byte >> (4 * (col & 1))) & 0xF);
  };
  std::vector<uint8_t> out(static_cast<size_t>(n) * row_bytes);
  for (int64_t t0 = 0; t0 < n / 16; ++t0) {
    uint8_t* tile = out.data() + t0 * tile_bytes;
    for (int64_t j = 0; j < k / 64; ++j) {
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, c = lane % 4;
        for (int i = 0; i < 4; ++i) {
          const int h = i / 2, e = i % 2;
          uint32_t w = 0;
          for (int p = 0; p < 8; ++p) {
            const int64_t row = 16 * t0 + g + 8 * (p & 1);
            const int64_t col = 64 * j + 32 * h + 8 * c + 4 * e + 2 * ((p >> 1) & 1) + (p >> 2);
            w |= nibble(row, col) << (4 * p);
          }
          std::memcpy(tile + j * 512 + lane * 16 + i * 4, &w, 4);
        }
      }
    }
    uint8_t* scales = tile + (k / 64) * 512;
    for (int64_t q = 0; q < k / g_elems; ++q) {
      for (int g = 0; g < 8; ++g) {
        for (int half = 0; half < 2; ++half) {
          const int64_t row = 16 * t0 + g + 8 * half;
          std::memcpy(scales + q * 64 + g * 8 + half * 4, &b[row * row_bytes + q * block_bytes], 4);
        }
      }
    }
  }
  return out;
}

// gpu.linear on w (on the device, in whichever layout gpu keeps it) against
// the CPU on `bytes`, the row-of-blocks weight w was made from.
void check_linear(CudaBackend& gpu, const Tensor& w, const std::vector<uint8_t>& bytes, DType dt,
                  int64_t rows, bool bias, bool f32_out) {
  Backend& cpu = cpu_backend();
  const int64_t n = w.dim(0), k = w.dim(1);
  std::vector<float> x = uniform(static_cast<size_t>(rows * k), -1, 1);
  std::vector<float> b = uniform(static_cast<size_t>(n), -1, 1);
  round_all(dt, x);
  round_all(dt, b);
  const DType out_dt = f32_out ? DType::kF32 : dt;
  DevTensor gx(gpu, dt, {rows, k}, x), gb(gpu, dt, {n}, b);
  DevTensor gout(gpu, out_dt, {rows, n});
  gout.poison();
  gpu.linear(gx.t(), w, bias ? gb.t() : Tensor(), gout.t());
  Weight cw(cpu, w.dtype, n, k, bytes);
  DevTensor cx(cpu, DType::kF32, {rows, k}, x), cb(cpu, DType::kF32, {n}, b);
  DevTensor cout(cpu, DType::kF32, {rows, n});
  cpu.linear(cx.t(), cw.tensor, bias ? cb.t() : Tensor(), cout.t());
  const bool in_registers = rows <= cuda::kW4TileMaxRows;
  expect_close(gout.download(), cout.download(), dt, "w4 tiles linear", 1.0,
               f32_out && in_registers ? 0.5 : 1.0);
}

// launch_w4_tile_gemv with `kernel` on w (in the tile layout) against the
// CPU on `bytes`, as check_linear (w's dtype without _perm: no gather).
void check_kernel(CudaBackend& gpu, cuda::W4TileKernel kernel, const Tensor& w,
                  const std::vector<uint8_t>& bytes, DType dt, int64_t rows, bool bias,
                  bool f32_out) {
  Backend& cpu = cpu_backend();
  const int64_t n = w.dim(0), k = w.dim(1);
  std::vector<float> x = uniform(static_cast<size_t>(rows * k), -1, 1);
  std::vector<float> b = uniform(static_cast<size_t>(n), -1, 1);
  round_all(dt, x);
  round_all(dt, b);
  const DType out_dt = f32_out ? DType::kF32 : dt;
  DevTensor gx(gpu, dt, {rows, k}, x), gb(gpu, dt, {n}, b);
  DevTensor gout(gpu, out_dt, {rows, n});
  gout.poison();
  cuda::QuantGemvParams p;
  p.dtype = dt;
  p.w_dtype = w.dtype;
  p.x = gx.t().data;
  p.w = w.data;
  p.bias = bias ? gb.t().data : nullptr;
  p.bias_dtype = dt;
  p.out = gout.t().data;
  p.out_dtype = out_dt;
  p.rows = static_cast<int>(rows);
  p.n = n;
  p.k = k;
  p.w_tiles = true;
  ASSERT_TRUE(cuda::w4_tile_gemv_supports(p));
  EXPECT_EQ(cuda::w4_tile_gemv_v2_supports(p),
            (rows <= 8 && k <= cuda::kW4TileV2MaxK) ||
                (rows <= cuda::kW4TileV2LongMaxRows && k <= cuda::kW4TileV2LongMaxK));
  ASSERT_EQ(cuda::launch_w4_tile_gemv(p, kernel, gpu.stream()), cudaSuccess);
  gpu.synchronize();
  Weight cw(cpu, w.dtype, n, k, bytes);
  DevTensor cx(cpu, DType::kF32, {rows, k}, x), cb(cpu, DType::kF32, {n}, b);
  DevTensor cout(cpu, DType::kF32, {rows, n});
  cpu.linear(cx.t(), cw.tensor, bias ? cb.t() : Tensor(), cout.t());
  expect_close(gout.download(), cout.download(), dt, "w4 tile kernel", 1.0, f32_out ? 0.5 : 1.0);
}

TEST(CudaW4TilesTest, RepackMatchesTheLayout) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  for (DType wt : kW4Formats) {
    const int64_t n = 48, k = dtype_block_elems(wt) == 128 ? 256 : 192;
    SCOPED_TRACE(name_of(wt));
    const std::vector<uint8_t> bytes = test::random_weight(wt, n, k, rng());
    Weight w(gpu, wt, n, k, bytes);
    ASSERT_TRUE(gpu.in_w4_tiles(w.tensor));
    std::vector<uint8_t> got(bytes.size());
    gpu.copy_to_host(got.data(), w.buffer.data(), got.size());
    const std::vector<uint8_t> want = host_tiles(wt, n, k, bytes);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin())) << "tile bytes";
    EXPECT_TRUE(std::equal(bytes.begin() + want.size(), bytes.end(), got.begin() + want.size()))
        << "the permutation after the rows";
  }
  expect_status_ok(gpu);
}

TEST(CudaW4TilesTest, DecodeMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t batches[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32};
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (DType wt : kW4Formats) {
      for (int64_t n : {16, 48, 4096 + 16}) {
        for (int64_t k : {64, 192, 4096}) {
          if (k % dtype_block_elems(wt) != 0) continue;
          const std::vector<uint8_t> bytes = test::random_weight(wt, n, k, rng());
          Weight w(gpu, wt, n, k, bytes);
          ASSERT_TRUE(gpu.in_w4_tiles(w.tensor)) << name_of(wt) << " n=" << n << " k=" << k;
          for (size_t i = 0; i < std::size(batches); ++i) {
            const int64_t rows = batches[i];
            if (n * k > 1 << 20 && rows != 1 && rows != 8 && rows != 32) continue;  // CPU time
            const bool bias = (rows + n) % 3 == 0, f32_out = (rows + k) % 4 == 1;
            SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                         " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                         (bias ? " bias" : "") + (f32_out ? " f32-out" : ""));
            check_linear(gpu, w.tensor, bytes, dt, rows, bias, f32_out);
          }
        }
      }
    }
    expect_status_ok(gpu);
  }
}

// Each decode kernel (v1, v2) launched directly, T = 1..8, on the edges of
// v2's persistent loop: tiles < CTAs, = the most CTAs (m), m + 1 (two
// rounds, one CTA one tile short), 2 m + 1 (three rounds: the unrolled
// loop's odd exit), N = 16 * 1000 + 16; K = 64 (one warp, one chunk), 1152
// (a last warp of 2 chunks), 4096 (16 warps); long K (x in shared memory up
// to 4 rows, v1 above): 14336 (4 units a tile, tiles < m and = m_long + 1),
// 5120 (units of 4 + 1 or 4 + 2 chunks), 4160 (5 chunks a warp, the last 3
// warps none; groups of 32 and 64 only).
TEST(CudaW4TilesTest, BothKernelsMatchCpu) {
  PAGODA_REQUIRE_GPU();
  const DType kFormats[] = {DType::kW4G32, DType::kW4G64, DType::kW4G128};
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (DType wt : kFormats) {
      cuda::QuantGemvParams probe;
      probe.dtype = dt;
      probe.w_dtype = wt;
      probe.rows = 1;
      probe.k = 1024;
      probe.w_tiles = true;
      const int64_t m = cuda::w4_tile_gemv_v2_max_ctas(probe);
      probe.k = 14336;
      const int64_t m_long = cuda::w4_tile_gemv_v2_max_ctas(probe);
      ASSERT_GT(m, 0);
      ASSERT_GT(m_long, 0);
      struct Shape {
        int64_t n, k;
      };
      const Shape shapes[] = {{48, 1024},          {16 * m, 1024},   {16 * (m + 1), 1024},
                              {16 * (2 * m + 1), 1024}, {16 * 1000 + 16, 4096}, {32, 64},
                              {16 * (m + 3), 1152}, {64, 4096},      {32, 14336},
                              {16 * (m_long + 1), 14336}, {16 * 40, 5120}, {48, 4160}};
      for (const Shape& sh : shapes) {
        if (sh.k % dtype_block_elems(wt) != 0) continue;
        const std::vector<uint8_t> bytes = test::random_weight(wt, sh.n, sh.k, rng());
        Weight w(gpu, wt, sh.n, sh.k, bytes);
        ASSERT_TRUE(gpu.in_w4_tiles(w.tensor));
        for (cuda::W4TileKernel kernel : {cuda::W4TileKernel::kV1, cuda::W4TileKernel::kV2}) {
          for (int64_t rows : {1, 2, 3, 5, 8}) {
            // CPU time: fewer rows for large weights.
            if (sh.n * sh.k > 1 << 22 && rows != 1 && rows != 3 && rows != 8) continue;
            if (sh.n * sh.k > 1 << 24 && rows == 8) continue;
            const bool bias = (rows + sh.n / 16) % 2 == 0, f32_out = rows == 3 || rows == 8;
            SCOPED_TRACE(name_of(dt) + " " + name_of(wt) +
                         (kernel == cuda::W4TileKernel::kV1 ? " v1" : " v2") +
                         " rows=" + std::to_string(rows) + " n=" + std::to_string(sh.n) +
                         " k=" + std::to_string(sh.k) + (bias ? " bias" : "") +
                         (f32_out ? " f32-out" : ""));
            check_kernel(gpu, kernel, w.tensor, bytes, dt, rows, bias, f32_out);
          }
        }
      }
    }
    expect_status_ok(gpu);
  }
}

// More rows than the tile kernel takes: the tile dequantization and cuBLASLt.
TEST(CudaW4TilesTest, DequantizedMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (DType wt : kW4Formats) {
      for (int64_t rows : {40, 200}) {
        const int64_t n = 48, k = 1024;
        SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows));
        const std::vector<uint8_t> bytes = test::random_weight(wt, n, k, rng());
        Weight w(gpu, wt, n, k, bytes);
        ASSERT_TRUE(gpu.in_w4_tiles(w.tensor));
        check_linear(gpu, w.tensor, bytes, dt, rows, rows == 40, rows == 200);
      }
    }
    expect_status_ok(gpu);
  }
}

// Rows [16, 48) of a 64-row weight (a fused weight's part, whole tiles):
// the same product as those rows' blocks alone.
TEST(CudaW4TilesTest, ViewOfWholeTiles) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  for (DType wt : {DType::kW4G32, DType::kW4G128}) {
    const int64_t n = 64, k = 512;
    const std::vector<uint8_t> bytes = test::random_weight(wt, n, k, rng());
    Weight w(gpu, wt, n, k, bytes);
    const size_t row_bytes = dtype_nbytes(wt, k);
    const Tensor part(static_cast<char*>(w.tensor.data) + 16 * row_bytes, wt, {32, k});
    ASSERT_TRUE(gpu.in_w4_tiles(part));
    const std::vector<uint8_t> part_bytes(bytes.begin() + 16 * row_bytes,
                                          bytes.begin() + 48 * row_bytes);
    for (int64_t rows : {1, 5, 20, 100}) {
      SCOPED_TRACE(name_of(wt) + " rows=" + std::to_string(rows));
      check_linear(gpu, part, part_bytes, DType::kBF16, rows, rows == 5, rows == 20);
    }
  }
  expect_status_ok(gpu);
}

// N % 16 != 0, and any weight with the repack off (PAGODA_W4_TILES=0):
// kept in blocks, on the row-of-blocks kernels.
TEST(CudaW4TilesTest, OtherWeightsStayInBlocks) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  for (DType wt : {DType::kW4G128, DType::kW4G64Perm}) {
    {
      const int64_t n = 40, k = 1024;
      const std::vector<uint8_t> bytes = test::random_weight(wt, n, k, rng());
      Weight w(gpu, wt, n, k, bytes);
      EXPECT_FALSE(gpu.in_w4_tiles(w.tensor));
      for (int64_t rows : {1, 8, 40})
        check_linear(gpu, w.tensor, bytes, DType::kBF16, rows, true, false);
    }
    gpu.set_w4_tiles(false);
    const int64_t n = 48, k = 1024;
    const std::vector<uint8_t> bytes = test::random_weight(wt, n, k, rng());
    Weight w(gpu, wt, n, k, bytes);
    gpu.set_w4_tiles(true);
    EXPECT_FALSE(gpu.in_w4_tiles(w.tensor));
    for (int64_t rows : {1, 8, 40})
      check_linear(gpu, w.tensor, bytes, DType::kBF16, rows, false, true);
  }
  expect_status_ok(gpu);
}

// Freed memory is no longer taken for the tile layout.
TEST(CudaW4TilesTest, DeallocateForgets) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const int64_t n = 32, k = 256;
  Tensor stale;
  {
    Weight w(gpu, DType::kW4G128, n, k, test::random_weight(DType::kW4G128, n, k, rng()));
    ASSERT_TRUE(gpu.in_w4_tiles(w.tensor));
    stale = w.tensor;
  }
  EXPECT_FALSE(gpu.in_w4_tiles(stale));
  expect_status_ok(gpu);
}

TEST(CudaW4TilesTest, GraphReplayMatchesEager) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  for (DType wt : {DType::kW4G128, DType::kW4G32Perm}) {
    // rows 3: the v2 kernels (K 1024 in registers, 14336 through shared
    // memory; unless PAGODA_W4_TILE_KERNEL=v1), 20: v1, 100: dequantized.
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{3, 1024}, {3, 14336}, {20, 1024},
                           {100, 1024}}) {
      SCOPED_TRACE(name_of(wt) + " rows=" + std::to_string(rows) + " k=" + std::to_string(k));
      const int64_t n = 320;
      Weight w(gpu, wt, n, k, test::random_weight(wt, n, k, rng()));
      ASSERT_TRUE(gpu.in_w4_tiles(w.tensor));
      DevTensor x(gpu, DType::kBF16, {rows, k}), out(gpu, DType::kBF16, {rows, n});
      auto record = [&] { gpu.linear(x.t(), w.tensor, Tensor(), out.t()); };
      x.upload(uniform(static_cast<size_t>(rows * k), -1, 1));
      expect_replay_matches_eager(gpu, out, record);
    }
  }
  expect_status_ok(gpu);
}

}  // namespace
}  // namespace pagoda::gpu_test
