// linear with a block-dtype weight (GGUF quantization blocks) on CUDA against
// the CPU backend on the same blocks, for every format: the decode kernels
// (1..8 rows: quant_staged_gemv.cu for q8_0 / q4_0 / q4_1, quant_mma_gemv.cu,
// else quant_gemv.cu; each choice of CudaBackend::set_quant_decode), the
// wide tensor-core kernel (9..64 rows, launch_quant_mma_wide) and the
// dequantize-then-cuBLASLt path (more rows, or set_quant_wide(false);
// cuda_quant_linear.cpp), over odd N, several K, with and without bias
// and f32 output, on fresh random blocks (random_blocks.h: random quant
// bytes, finite f16 scales over 2^-16..2^-2 with random signs, some zero).
// Then both paths inside a captured CUDA graph against eager execution.
//
// Tolerance: as the dense linear (expect_close for the compute dtype): the
// decode kernel differs from the CPU only in summation order (and the final
// rounding), the cuBLASLt path also in rounding each dequantized weight to
// the compute dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/quant_linear_kernels.h"
#include "backend/cuda/w4_tiles.h"
#include "random_blocks.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

std::string name_of(DType t) {
  return std::string(dtype_name(t));
}

// Block bytes of `t` on a device, prepared for linear(), `offset` bytes
// into the allocation (2: rows only 2-byte aligned).
struct DevBlocks {
  DevBlocks(Backend& backend, DType t, int64_t n, int64_t k, const std::vector<uint8_t>& host,
            size_t offset = 0)
      : buffer(&backend, host.size() + offset),
        tensor(static_cast<char*>(buffer.data()) + offset, t, {n, k}) {
    backend.copy_to_device(tensor.data, host.data(), host.size());
    backend.synchronize();
    const Status st = backend.prepare_block_weight(tensor);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  }
  DeviceBuffer buffer;
  Tensor tensor;
};

struct QuantCase {
  int64_t rows, n, k;
  bool bias, f32_out;
  size_t w_offset = 0;  // DevBlocks offset of the GPU weight
  // Launch cuda::launch_quant_mma_gemv (up to 8 rows) or
  // cuda::launch_quant_mma_wide (more) itself instead of linear() (which
  // may pick another kernel): the case must be one it supports.
  bool direct_mma = false;
  // Launch cuda::launch_quant_tiled_gemm itself (any rows): the case must be
  // one it supports.
  bool direct_tiled = false;
};

// The decode / wide kernels' parameters for out = x w^T (+ bias).
cuda::QuantGemvParams params_of(const Tensor& x, const Tensor& w, const Tensor& bias,
                                const Tensor& out) {
  cuda::QuantGemvParams p;
  p.dtype = x.dtype;
  p.w_dtype = w.dtype;
  p.x = x.data;
  p.w = w.data;
  p.bias = bias.empty() ? nullptr : bias.data;
  p.bias_dtype = bias.dtype;
  p.out = out.data;
  p.out_dtype = out.dtype;
  p.rows = static_cast<int>(x.dim(0));
  p.n = w.dim(0);
  p.k = w.dim(1);
  return p;
}

// out = x w^T (+ bias) by the tensor-core decode or wide kernel alone.
void launch_mma_directly(CudaBackend& gpu, const Tensor& x, const Tensor& w, const Tensor& bias,
                         Tensor& out) {
  const cuda::QuantGemvParams p = params_of(x, w, bias, out);
  if (p.rows <= cuda::kQuantGemvMaxRows) {
    ASSERT_TRUE(cuda::quant_mma_gemv_supports(p));
    ASSERT_EQ(cuda::launch_quant_mma_gemv(p, gpu.stream()), cudaSuccess);
  } else {
    ASSERT_TRUE(cuda::quant_mma_wide_supports(p));
    ASSERT_EQ(cuda::launch_quant_mma_wide(p, gpu.stream()), cudaSuccess);
  }
}

void run_case(DType dt, DType wt, const QuantCase& c) {
  CudaBackend& gpu = *cuda_backend(dt);
  Backend& cpu = cpu_backend();
  const int64_t num_blocks = c.n * c.k / dtype_block_elems(wt);
  const std::vector<uint8_t> blocks = test::random_blocks(wt, num_blocks, rng());
  std::vector<float> x = uniform(static_cast<size_t>(c.rows * c.k), -1, 1);
  std::vector<float> b = uniform(static_cast<size_t>(c.n), -1, 1);
  round_all(dt, x);
  round_all(dt, b);
  const DType out_dt = c.f32_out ? DType::kF32 : dt;
  // The kernels launched directly read the row-of-blocks layout: not
  // repacked into 4-bit tiles (w4_tiles.h) for them.
  const bool tiles_on = gpu.w4_tiles();
  gpu.set_w4_tiles(tiles_on && !c.direct_mma && !c.direct_tiled);
  DevBlocks gw(gpu, wt, c.n, c.k, blocks, c.w_offset);
  gpu.set_w4_tiles(tiles_on);
  DevTensor gx(gpu, dt, {c.rows, c.k}, x), gb(gpu, dt, {c.n}, b);
  DevTensor gout(gpu, out_dt, {c.rows, c.n});
  gout.poison();
  Tensor out_t = gout.t();
  // Up to 8 rows, and 9..kQuantWideRouteMaxRows on the wide kernel (linear()'s
  // route; launched directly up to kQuantWideMaxRows), the weight is
  // dequantized in f32 registers (below).
  // So is it on the tiled kernel (cuda::quant_tiled_route, its formats).
  // A 4-bit tile-layout weight: the tile kernel (up to kW4TileMaxRows), else
  // dequantized.
  cuda::QuantGemvParams p = params_of(gx.t(), gw.tensor, c.bias ? gb.t() : Tensor(), out_t);
  p.w_tiles = gpu.in_w4_tiles(gw.tensor);
  const bool in_registers = c.direct_mma || c.direct_tiled || c.rows <= cuda::kQuantGemvMaxRows ||
                            (p.w_tiles && c.rows <= cuda::kW4TileMaxRows && gpu.quant_wide()) ||
                            (c.rows <= cuda::kQuantWideRouteMaxRows && gpu.quant_wide() &&
                             cuda::quant_mma_wide_supports(p)) ||
                            (cuda::quant_tiled_route(c.rows, c.n) && gpu.quant_tiled() &&
                             cuda::quant_tiled_gemm_supports(p));
  if (c.direct_mma) {
    launch_mma_directly(gpu, gx.t(), gw.tensor, c.bias ? gb.t() : Tensor(), out_t);
  } else if (c.direct_tiled) {
    ASSERT_TRUE(cuda::quant_tiled_gemm_supports(p));
    ASSERT_EQ(cuda::launch_quant_tiled_gemm(p, gpu.stream()), cudaSuccess);
  } else {
    gpu.linear(gx.t(), gw.tensor, c.bias ? gb.t() : Tensor(), out_t);
  }
  DevBlocks cw(cpu, wt, c.n, c.k, blocks);
  DevTensor cx(cpu, DType::kF32, {c.rows, c.k}, x), cb(cpu, DType::kF32, {c.n}, b);
  DevTensor cout(cpu, DType::kF32, {c.rows, c.n});
  cpu.linear(cx.t(), cw.tensor, c.bias ? cb.t() : Tensor(), cout.t());
  // The decode and wide kernels dequantize in f32 registers: an f32 output
  // is held to half the dtype's ulp tolerance. The cuBLASLt path dequantizes
  // the weight into the compute dtype first (as --gguf-dequantize does at
  // load), so K-format values that dtype cannot hold (q3_K / q6_K: an int8
  // sub-scale times an f16 scale) are rounded: the dtype's tolerance.
  expect_close(gout.download(), cout.download(), dt, "quant linear", 1.0,
               c.f32_out && in_registers ? 0.5 : 1.0);
}

TEST(CudaQuantLinearTest, EveryFormatMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t batches[] = {1, 2, 3, 8, 9, 64, 300};
  // (n, k): odd n, rows not a multiple of the CTA's 4 warps; k 1 or more
  // shared-memory stages of the decode kernel (K formats: 16 blocks = 4096).
  const std::pair<int64_t, int64_t> shapes[] = {{1, 256},    {33, 512}, {257, 1280},
                                                {100, 4096}, {7, 4352}, {515, 768}};
  for (DType dt : kHalfTypes) {
    for (DType wt : test::block_dtypes()) {
      for (int64_t rows : batches) {
        for (size_t s = 0; s < std::size(shapes); ++s) {
          const auto [n, k] = shapes[s];
          const QuantCase c{rows, n, k, (rows + s) % 3 == 0, (rows + s) % 4 == 1};
          SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                       " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       (c.bias ? " bias" : "") + (c.f32_out ? " f32-out" : ""));
          run_case(dt, wt, c);
        }
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// K of one 32-element block and odd multiples (the 32-element formats only:
// K formats need multiples of 256), and a large decode shape per format.
TEST(CudaQuantLinearTest, ShortRowsAndLargeShapes) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    for (DType wt : test::block_dtypes()) {
      const int64_t block = dtype_block_elems(wt);
      for (int64_t k : {block, 3 * block, 5 * block}) {
        for (int64_t rows : {1, 5, 17}) {
          SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                       " k=" + std::to_string(k));
          run_case(dt, wt, {rows, 45, k, true, false});
        }
      }
      SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " 4096x4096");
      run_case(dt, wt, {1, 4096, 4096, false, false});
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// The decode kernels (quant_staged_gemv.cu for q4_0, q4_1, q8_0;
// quant_mma_gemv.cu for the other formats but one row of q5_0;
// quant_gemv.cu / group_gemv.cu for that)
// at every T 1..8 over N around the 16-row tile (1, 15, 17, 100: 8-warp
// CTAs; 16400 = 1025 tiles: 4-warp CTAs, K of one block only) and K of 1
// block, an odd count that leaves a partial 256-element step (32-element
// formats) or an uneven split over the CTA's warps, and a long row; then
// GGUF rows only 2-byte aligned (q4_0 / q4_1 / q8_0 keep the staged
// kernel, q5_0 / q3_K / q6_K the mma one, q5_1 / q2_K / q4_K / q5_K fall
// back to the CUDA-core one; group weights are always 4-byte aligned).
TEST(CudaQuantLinearTest, DecodeKernelsEveryRowCount) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    for (DType wt : test::block_dtypes()) {
      const int64_t block = dtype_block_elems(wt);
      const int64_t ks[] = {block, block == 32 ? 9 * block : 17 * block,
                            block == 256 ? 4352 : 4096 + 3 * block};
      const int64_t ns[] = {1, 15, 17, 100, 16400};
      for (int64_t rows = 1; rows <= 8; ++rows) {
        for (size_t i = 0; i < std::size(ks); ++i) {
          for (size_t j = 0; j < std::size(ns); ++j) {
            if (ns[j] == 16400 && i != 0) continue;  // 1025 tiles: 4-warp CTAs, one K
            const bool bias = (rows + i + j) % 3 == 0, f32_out = (rows + j) % 4 == 1;
            const size_t offset = !is_group_dtype(wt) && (rows + i + j) % 5 == 0 ? 2 : 0;
            const QuantCase c{rows, ns[j], ks[i], bias, f32_out, offset};
            SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                         " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                         (c.bias ? " bias" : "") + (c.f32_out ? " f32-out" : "") +
                         (c.w_offset ? " w+2" : ""));
            run_case(dt, wt, c);
          }
        }
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// q8_0, q4_0 and q4_1 decode (T 1..8) under every kernel choice
// (CudaBackend::QuantDecode: staged, staged-v1, unstaged, legacy), bf16 and f16 x, f32
// and x-dtype out, bias on and off: N 1, 17 (a partial 16-row tile), 100,
// and 16400 (1025 tiles: 4-warp CTAs) with a short K; K of 1 and 3 blocks
// (one partial 256-element step; rows of 102 / 54 bytes start at every
// even offset in a 16-byte granule, q4_1's 60 at every multiple of 4 plus
// the weight's offset), 17 blocks (544: a partial last
// step), 4096 and 14336 (the 8B rows: 16 and 56 steps over the CTA's
// warps); the weight at allocation offsets 0, 2, 6 and 14 bytes (head and
// tail of each row's 16-byte copies). Fresh random blocks per case
// (random_blocks.h: scales 2^-16..2^-2, both signs, some zero).
TEST(CudaQuantLinearTest, StagedFormatsEveryKernelChoice) {
  PAGODA_REQUIRE_GPU();
  using QuantDecode = CudaBackend::QuantDecode;
  const std::pair<QuantDecode, const char*> choices[] = {{QuantDecode::kStaged, "staged"},
                                                         {QuantDecode::kStagedV1, "staged-v1"},
                                                         {QuantDecode::kUnstaged, "unstaged"},
                                                         {QuantDecode::kLegacy, "legacy"}};
  const int64_t ks[] = {32, 96, 544, 4096, 14336};
  const int64_t ns[] = {1, 17, 100, 16400};
  const size_t offsets[] = {0, 2, 6, 14};
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    const QuantDecode before = gpu.quant_decode();
    for (const auto& [choice, choice_name] : choices) {
      gpu.set_quant_decode(choice);
      for (DType wt : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
        for (int64_t rows = 1; rows <= 8; ++rows) {
          for (size_t i = 0; i < std::size(ks); ++i) {
            for (size_t j = 0; j < std::size(ns); ++j) {
              if (ns[j] == 16400 && ks[i] != 96) continue;  // 1025 tiles: one short K
              const bool bias = (rows + i + j) % 2 == 0, f32_out = (rows + i) % 3 == 1;
              const size_t offset = offsets[(rows + i + j) % std::size(offsets)];
              const QuantCase c{rows, ns[j], ks[i], bias, f32_out, offset};
              SCOPED_TRACE(std::string(choice_name) + " " + name_of(dt) + " " + name_of(wt) +
                           " rows=" + std::to_string(rows) + " n=" + std::to_string(c.n) +
                           " k=" + std::to_string(c.k) + (c.bias ? " bias" : "") +
                           (c.f32_out ? " f32-out" : "") + " w+" + std::to_string(offset));
              run_case(dt, wt, c);
            }
          }
        }
      }
    }
    gpu.set_quant_decode(before);
    expect_status_ok(gpu);
  }
}

cuda::StagedConfig staged_config(int64_t n, int64_t k, cuda::StagedPlan plan) {
  cuda::QuantGemvParams p;
  p.n = n;
  p.k = k;
  return cuda::quant_staged_gemv_config(p, plan);
}

bool same_config(const cuda::StagedConfig& a, const cuda::StagedConfig& b) {
  return a.warps == b.warps && a.stages == b.stages && a.whole_steps == b.whole_steps;
}

// The staged kernel's configuration per shape (quant_staged_gemv_config):
// the pipelined plan gives the 8B's qkv and o_proj (384 / 256 tiles, 16
// steps) 4 warps x 3 buffers, down (56 steps) 8 x 2, gate_up (1792 tiles)
// 4 x 2, all whole steps, the boundaries at 1024 tiles and 32 steps; the
// double-buffered plan (the first version) 8 warps below 1024 tiles, else
// 4, 2 buffers, a block at a time.
TEST(CudaQuantLinearTest, StagedConfigPerShape) {
  using cuda::StagedConfig;
  using cuda::StagedPlan;
  const struct {
    int64_t n, k;
    StagedConfig pipelined, double_buffered;
  } cases[] = {
      {6144, 4096, {4, 3, true}, {8, 2, false}},     {4096, 4096, {4, 3, true}, {8, 2, false}},
      {28672, 4096, {4, 2, true}, {4, 2, false}},    {4096, 14336, {8, 2, true}, {8, 2, false}},
      {16368, 8192, {4, 3, true}, {8, 2, false}},    {16369, 8192, {4, 2, true}, {4, 2, false}},
      {100, 8192 + 32, {8, 2, true}, {8, 2, false}}, {1, 32, {4, 3, true}, {8, 2, false}}};
  for (const auto& c : cases) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " k=" + std::to_string(c.k));
    EXPECT_TRUE(same_config(staged_config(c.n, c.k, StagedPlan::kPipelined), c.pipelined));
    EXPECT_TRUE(
        same_config(staged_config(c.n, c.k, StagedPlan::kDoubleBuffered), c.double_buffered));
  }
}

// Both staged plans (CudaBackend::QuantDecode kStaged: pipelined, kStagedV1:
// double-buffered) against the CPU at every T 1..8, bf16 and f16 x, f32 and
// x-dtype out, over shapes that together take every pipelined configuration
// (asserted): N 17 x K 32 (one partial step; 4 x 3), 100 x 8192 (32 whole
// steps, 8 a warp: the 3 buffers wrap; 4 x 3), 33 x 8224 (33 steps, the
// last one block; 8 x 2), 16400 x 288 (1025 tiles, a whole and a partial
// step; 4 x 2), 1 x 4096 (one row, 4 x 3); the weight at offsets 0, 2, 6,
// 14. Fresh random blocks per case.
TEST(CudaQuantLinearTest, StagedPlansEveryConfiguration) {
  PAGODA_REQUIRE_GPU();
  using QuantDecode = CudaBackend::QuantDecode;
  const std::pair<int64_t, int64_t> shapes[] = {
      {17, 32}, {100, 8192}, {33, 8224}, {16400, 288}, {1, 4096}};
  const size_t offsets[] = {0, 2, 6, 14};
  std::vector<cuda::StagedConfig> seen;
  for (const auto& [n, k] : shapes) {
    const cuda::StagedConfig cfg = staged_config(n, k, cuda::StagedPlan::kPipelined);
    bool known = false;
    for (const cuda::StagedConfig& s : seen) known = known || same_config(s, cfg);
    if (!known) seen.push_back(cfg);
  }
  EXPECT_EQ(seen.size(), 3u) << "the shapes take 4x3, 4x2 and 8x2";
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    const QuantDecode before = gpu.quant_decode();
    for (QuantDecode choice : {QuantDecode::kStaged, QuantDecode::kStagedV1}) {
      gpu.set_quant_decode(choice);
      for (DType wt : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
        for (int64_t rows = 1; rows <= 8; ++rows) {
          for (size_t i = 0; i < std::size(shapes); ++i) {
            const auto [n, k] = shapes[i];
            const bool bias = (rows + i) % 2 == 0, f32_out = (rows + i) % 3 != 1;
            const size_t offset = offsets[(rows + i) % std::size(offsets)];
            const QuantCase c{rows, n, k, bias, f32_out, offset};
            SCOPED_TRACE(std::string(choice == QuantDecode::kStaged ? "staged " : "staged-v1 ") +
                         name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) + " n=" +
                         std::to_string(n) + " k=" + std::to_string(k) + (bias ? " bias" : "") +
                         (f32_out ? " f32-out" : "") + " w+" + std::to_string(offset));
            run_case(dt, wt, c);
          }
        }
      }
    }
    gpu.set_quant_decode(before);
    expect_status_ok(gpu);
  }
}

// Which (format, rows) the tensor-core decode kernel takes: every block
// format without _perm (aligned weight and x) at 1..8 rows, except one row
// of q4_0 / q4_1 / q5_1 / q8_0 and one or two rows of q5_0
// (quant_mma_gemv_supports); none past 8 rows.
bool mma_kernel_expected(DType wt, int64_t rows) {
  const bool narrow = wt == DType::kQ4_0 || wt == DType::kQ4_1 || wt == DType::kQ5_1 ||
                      wt == DType::kQ8_0;
  const int64_t first = wt == DType::kQ5_0 ? 3 : narrow ? 2 : 1;
  return rows >= first && rows <= cuda::kQuantGemvMaxRows;
}

TEST(CudaQuantLinearTest, MmaKernelSupportsEveryFormat) {
  for (DType dt : kHalfTypes) {
    for (DType wt : test::block_dtypes()) {
      for (int rows = 0; rows <= cuda::kQuantGemvMaxRows + 1; ++rows) {
        cuda::QuantGemvParams p;
        p.dtype = p.out_dtype = dt;
        p.w_dtype = wt;
        p.x = p.w = p.out = reinterpret_cast<void*>(uintptr_t{256});  // aligned, never read
        p.rows = rows;
        p.n = 17;
        p.k = 9 * dtype_block_elems(wt);
        EXPECT_EQ(cuda::quant_mma_gemv_supports(p), mma_kernel_expected(wt, rows))
            << name_of(dt) << " " << name_of(wt) << " rows=" << rows;
      }
    }
  }
}

// The tensor-core decode kernel launched directly (linear() could hide a
// format falling back to the CUDA-core kernel) for every format it takes, at
// every row count it takes, over odd N (1 / 15 / 17 around the 16-row tile,
// 333 = 21 tiles) and K of 1, 3, 9 and 33 blocks (odd multiples of 32 for
// the 32-element formats: partial 256-element steps; 256-element formats:
// uneven splits over the CTA's warps), bias on / off, f32 / dtype output, on
// fresh random blocks (every 4- / 6-bit sub-scale and min value, f16 scales
// over 2^-16..2^-2 of both signs and zero: random_blocks.h).
TEST(CudaQuantLinearTest, MmaKernelEveryFormatMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t ns[] = {1, 15, 17, 333};
  const int64_t block_counts[] = {1, 3, 9, 33};
  for (DType dt : kHalfTypes) {
    for (DType wt : test::block_dtypes()) {
      for (int64_t rows = 1; rows <= cuda::kQuantGemvMaxRows; ++rows) {
        if (!mma_kernel_expected(wt, rows)) continue;
        for (size_t i = 0; i < std::size(block_counts); ++i) {
          for (size_t j = 0; j < std::size(ns); ++j) {
            QuantCase c{rows, ns[j], block_counts[i] * dtype_block_elems(wt),
                        (rows + i + j) % 2 == 0, (rows + 2 * i + j) % 3 == 0};
            c.direct_mma = true;
            SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                         " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                         (c.bias ? " bias" : "") + (c.f32_out ? " f32-out" : ""));
            run_case(dt, wt, c);
          }
        }
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// The Llama-3.1-8B decode shapes (qkv, gate_up, down) at T 1 and 8 for the
// formats of Q2_K / Q3_K_M / Q4_K_M / Q5_0 / Q5_1 / Q8_0 files and AWQ /
// GPTQ 4-bit.
TEST(CudaQuantLinearTest, DecodeKernels8BShapes) {
  PAGODA_REQUIRE_GPU();
  const std::pair<int64_t, int64_t> shapes[] = {{6144, 4096}, {28672, 4096}, {4096, 14336}};
  for (DType wt : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ6_K, DType::kQ5_0,
                   DType::kQ5_1, DType::kQ8_0, DType::kW4G128}) {
    for (const auto& [n, k] : shapes) {
      for (int64_t rows : {1, 8}) {
        SCOPED_TRACE(name_of(wt) + " rows=" + std::to_string(rows) + " n=" + std::to_string(n) +
                     " k=" + std::to_string(k));
        run_case(DType::kBF16, wt, {rows, n, k, false, true});
      }
    }
  }
  expect_status_ok(*cuda_backend(DType::kBF16));
}

// Which rows the wide kernel takes: 9..64 of every block format without
// _perm (aligned weight and x), no fewer, no more.
TEST(CudaQuantLinearTest, MmaWideKernelSupportsEveryFormat) {
  for (DType dt : kHalfTypes) {
    for (DType wt : test::block_dtypes()) {
      for (int rows : {1, 8, 9, 16, 33, 64, 65, 128}) {
        cuda::QuantGemvParams p;
        p.dtype = p.out_dtype = dt;
        p.w_dtype = wt;
        p.x = p.w = p.out = reinterpret_cast<void*>(uintptr_t{256});  // aligned, never read
        p.rows = rows;
        p.n = 17;
        p.k = 9 * dtype_block_elems(wt);
        EXPECT_EQ(cuda::quant_mma_wide_supports(p), rows >= 9 && rows <= 64)
            << name_of(dt) << " " << name_of(wt) << " rows=" << rows;
      }
    }
    for (DType wt : test::k_perm_dtypes()) {
      cuda::QuantGemvParams p;
      p.dtype = p.out_dtype = dt;
      p.w_dtype = wt;
      p.x = p.w = p.out = reinterpret_cast<void*>(uintptr_t{256});
      p.rows = 16;
      p.n = 17;
      p.k = 9 * dtype_block_elems(wt);
      EXPECT_FALSE(cuda::quant_mma_wide_supports(p)) << name_of(wt);
    }
  }
}

// The wide kernel (T = 9..64) launched directly for every format at rows
// around its n8 tiles and 32-row launches (9, 16, 17, 31, 32, 48, 64), over
// (N, K): a row of K = 33 blocks, 17 rows (a partial 16-row tile) of 9
// blocks, 333 rows (21 tiles) of one block, 45 of 3 (odd multiples of 32
// for the 32-element formats: partial 256-element steps), bias on / off,
// f32 / dtype output; then through linear() with the weight 2 bytes into
// its allocation (GGUF formats: 2-byte aligned rows stay on the kernel for
// q4_0 / q5_0 / q8_0 / q3_K / q6_K, the others take the cuBLASLt path).
TEST(CudaQuantLinearTest, MmaWideKernelEveryFormatMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t batches[] = {9, 16, 17, 31, 32, 48, 64};
  const std::pair<int64_t, int64_t> shapes[] = {{1, 33}, {17, 9}, {333, 1}, {45, 3}};
  for (DType dt : kHalfTypes) {
    for (DType wt : test::block_dtypes()) {
      for (size_t r = 0; r < std::size(batches); ++r) {
        const int64_t rows = batches[r];
        for (size_t i = 0; i < std::size(shapes); ++i) {
          const auto [n, blocks] = shapes[i];
          QuantCase c{rows, n, blocks * dtype_block_elems(wt), (r + i) % 2 == 0,
                      (r + 2 * i) % 3 == 0};
          c.direct_mma = true;
          SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                       " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                       (c.bias ? " bias" : "") + (c.f32_out ? " f32-out" : ""));
          run_case(dt, wt, c);
        }
        if (!is_group_dtype(wt)) {
          const QuantCase c{rows, 40, 5 * dtype_block_elems(wt), r % 2 == 1, r % 3 == 1, 2};
          SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                       " linear w+2");
          run_case(dt, wt, c);
        }
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// linear() over long rows (K = 14336, the 8B down_proj: 56 steps over the
// CTA's warps) and many tiles (N = 4100) at T = 9 and 32 (the wide kernel,
// up to its route limit) and 40 (past it: dequantize + cuBLASLt), for the
// formats of common files; then the same rows with the wide kernel off
// (CudaBackend::set_quant_wide(false), PAGODA_QUANT_WIDE=dequant: the
// cuBLASLt path). The kernel itself at 33..64 rows: the direct launches above.
TEST(CudaQuantLinearTest, MmaWideKernelLongRows) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  for (bool wide : {true, false}) {
    gpu.set_quant_wide(wide);
    for (DType wt : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kW4G128}) {
      for (int64_t rows : {9, 32, 40}) {
        SCOPED_TRACE(name_of(wt) + " rows=" + std::to_string(rows) + (wide ? " wide" : " dequant"));
        run_case(DType::kBF16, wt, {rows, 96, 14336, rows == 32, rows != 9});
        run_case(DType::kBF16, wt, {rows, 4100, 512, rows == 9, rows == 32});
      }
    }
  }
  gpu.set_quant_wide(true);
  expect_status_ok(gpu);
}

// The formats of the tiled GEMM (launch_quant_tiled_gemm).
const DType kTiledFormats[] = {DType::kQ4_0,  DType::kQ4_1,   DType::kQ8_0,  DType::kQ4_K,
                               DType::kQ5_K,  DType::kQ6_K,   DType::kW4G32, DType::kW4G64,
                               DType::kW4G128, DType::kW8G32, DType::kW8G64, DType::kW8G128};

// Which weights the tiled GEMM takes: its formats with K a multiple of 256
// and w aligned to the format's loads, any rows; not q2_K, q3_K, q5_0,
// q5_1 or a _perm format (GPTQ act order keeps the dequantize path).
TEST(CudaQuantLinearTest, TiledGemmSupportsItsFormats) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  DeviceBuffer buf(&gpu, 64);
  for (DType wt : test::block_dtypes()) {
    cuda::QuantGemvParams p;
    p.w_dtype = wt;
    p.x = p.out = buf.data();
    p.w = buf.data();
    p.n = 100;
    p.k = 4096;
    const bool listed = std::find(std::begin(kTiledFormats), std::end(kTiledFormats), wt) !=
                        std::end(kTiledFormats);
    for (int rows : {1, 33, 64, 300, 5000}) {
      p.rows = rows;
      EXPECT_EQ(cuda::quant_tiled_gemm_supports(p), listed) << name_of(wt) << " rows=" << rows;
    }
    p.rows = 64;
    if (dtype_block_elems(wt) == 32) {
      p.k = 4096 + 32;  // not whole 256-element steps
      EXPECT_FALSE(cuda::quant_tiled_gemm_supports(p)) << name_of(wt);
    }
  }
  cuda::QuantGemvParams p;
  p.w_dtype = DType::kW4G128Perm;
  p.x = p.w = buf.data();
  p.out = buf.data();
  p.rows = 64;
  p.n = 100;
  p.k = 4096;
  EXPECT_FALSE(cuda::quant_tiled_gemm_supports(p));
}

// linear() at T = 33..300 (the tiled GEMM's route) for each of its formats
// against the CPU: odd N (partial 64-feature tiles), K = 256 (one step),
// 4096 and 14336 (the 8B down_proj: 56 steps), with and without bias and
// f32 output, w offset to the format's least alignment (a row's bytes then
// start mid 16-byte chunk in shared memory); then the kernel launched
// directly at T = 600 and 1000 (past the route), and the same rows with
// the tiled kernel off (set_quant_tiled(false), PAGODA_QUANT_TILED=0).
// linear()'s route to the tiled GEMM: 33..64 rows of a weight with at least
// 16384 output features (where it measured faster than dequantize + cuBLASLt).
TEST(CudaQuantLinearTest, TiledRoute) {
  EXPECT_FALSE(cuda::quant_tiled_route(32, 28672));
  EXPECT_TRUE(cuda::quant_tiled_route(33, 28672));
  EXPECT_TRUE(cuda::quant_tiled_route(64, 16384));
  EXPECT_TRUE(cuda::quant_tiled_route(64, 128256));
  EXPECT_FALSE(cuda::quant_tiled_route(65, 28672));
  EXPECT_FALSE(cuda::quant_tiled_route(64, 16383));
  EXPECT_FALSE(cuda::quant_tiled_route(48, 6144));
}

TEST(CudaQuantLinearTest, TiledGemmEveryFormatMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t batches[] = {33, 48, 64, 100, 128, 256, 300};
  const std::pair<int64_t, int64_t> shapes[] = {{67, 256}, {129, 4096}, {33, 14336}};
  for (DType dt : kHalfTypes) {
    for (DType wt : kTiledFormats) {
      const size_t offset = dtype_block_elems(wt) == 256 && wt != DType::kQ6_K ? 0
                            : wt == DType::kQ4_1 || wt >= DType::kW4G32 ? 4
                                                                          : 2;
      for (size_t b = 0; b < std::size(batches); ++b) {
        for (size_t s = 0; s < std::size(shapes); ++s) {
          const int64_t rows = batches[b];
          if (s == 2 && rows != 64 && rows != 300) continue;  // CPU time
          const auto [n, k] = shapes[s];
          QuantCase c{rows, n, k, (b + s) % 3 == 0, (b + s) % 4 == 1};
          c.w_offset = (b + s) % 2 == 0 ? offset : 0;
          c.direct_tiled = true;  // these n are below the route's (TiledRoute)
          SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                       " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       (c.bias ? " bias" : "") + (c.f32_out ? " f32-out" : "") +
                       " w_offset=" + std::to_string(c.w_offset));
          run_case(dt, wt, c);
        }
      }
      for (int64_t rows : {600, 1000}) {
        SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " direct rows=" + std::to_string(rows));
        QuantCase c{rows, 131, 512, true, rows == 600};
        c.direct_tiled = true;
        run_case(dt, wt, c);
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  gpu.set_quant_tiled(false);
  for (DType wt : {DType::kQ4_K, DType::kW4G128}) {
    SCOPED_TRACE(name_of(wt) + " tiled off");
    run_case(DType::kBF16, wt, {100, 129, 4096, true, false});
  }
  gpu.set_quant_tiled(true);
  expect_status_ok(gpu);
}

// The three paths (decode kernel, wide kernel in two 32-row launches,
// dequantize + cuBLASLt: 300 and 700 rows) and the tiled GEMM (40 rows of a
// 16384-feature weight) captured into a graph and replayed give the eager result.
TEST(CudaQuantLinearTest, GraphReplayMatchesEager) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (DType wt : {DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kW4G128, DType::kQ8_0}) {
      for (int64_t rows : {3, 40, 300, 700}) {
        SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows));
        const int64_t n = cuda::kQuantTiledRouteMinN, k = 1024;
        DevBlocks w(gpu, wt, n, k, test::random_blocks(wt, n * k / dtype_block_elems(wt), rng()));
        DevTensor x(gpu, dt, {rows, k}), out(gpu, dt, {rows, n});
        auto record = [&] { gpu.linear(x.t(), w.tensor, Tensor(), out.t()); };
        std::vector<float> input = uniform(static_cast<size_t>(rows * k), -1, 1);
        x.upload(input);
        expect_replay_matches_eager(gpu, out, record);
      }
    }
    expect_status_ok(gpu);
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
