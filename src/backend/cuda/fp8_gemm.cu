// Products with an FP8 weight for any number of rows on tensor cores
// (fp8_linear_kernels.h): prefill and batched decode with block scales, and
// per-row scales where cuBLASLt's FP8 GEMM does not apply.
//
// A CTA of 4 warps computes kTileN = 64 output features x kTileT = 64
// activation rows over all of k in steps of kTileK = 128 columns; warp
// (wn, wt) owns a 32 x 32 quarter, 2 x 4 mma tiles of 16 x 8. Each step's
// weight and activation tiles (64 rows x 128 bytes each) are copied to
// shared memory by cp.async, kStages deep (zero-filled past n, rows and k).
// On odd rows the 16-byte units of a 128-byte row are stored at unit ^ 4, so
// a quarter-warp's 16-byte reads (rows 2j and 2j + 1, units u .. u + 3 of
// each) cover the 32 banks once. A step's products (mma_e4m3_k64 on columns
// 0..63, then 64..127) accumulate in fresh registers and are then added to
// the f32 totals: with block scales (block % 128 == 0: a step lies in one
// group, a tile's 64 features in one row block) times
// s[t, kb] * w_scale[n / B, kb]. Epilogue: per-row scales, bias, store.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/fp8_mma.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/mma_helpers.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 128;  // 4 warps, 2 x 2 over the tile
constexpr int kTileN = 64;
constexpr int kTileT = 64;
constexpr int kTileK = 128;
constexpr int kStages = 3;
constexpr int kTileBytes = kTileN * kTileK;  // per operand and stage; kTileT == kTileN
constexpr int kCopies = kTileBytes / 16 / kThreads;

static_assert(kTileT == kTileN, "one copy loop fills both operands' tiles");

// Byte offset of unit u (16 bytes) of row r in a tile.
__device__ __forceinline__ int tile_offset(int r, int u) {
  return r * kTileK + ((u ^ ((r & 1) << 2)) << 4);
}

__device__ __forceinline__ uint4 load_tile16(const uint8_t* tile, int r, int u) {
  return *reinterpret_cast<const uint4*>(tile + tile_offset(r, u));
}

template <bool kBlock>
__global__ void __launch_bounds__(kThreads) fp8_gemm_kernel(Fp8LinearParams p) {
  // [stage][0: weight rows, 1: activation rows]
  __shared__ __align__(16) uint8_t smem[kStages][2][kTileBytes];
  pdl_enter();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int wn = warp >> 1, wt = warp & 1;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kTileT;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTileN;
  const int64_t steps = (p.k + kTileK - 1) / kTileK;

  auto copy_step = [&](int stage, int64_t step) {
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      const int id = tid + i * kThreads;
      const int r = id >> 3, u = id & 7;
      const int64_t col = step * kTileK + 16 * u;  // k % 16 == 0: all in or all out
      const bool w_ok = col < p.k && n0 + r < p.n;
      const bool x_ok = col < p.k && t0 + r < p.rows;
      cp_async_16(smem_addr(&smem[stage][0][tile_offset(r, u)]),
                  w_ok ? p.w + (n0 + r) * p.k + col : p.w, w_ok);
      cp_async_16(smem_addr(&smem[stage][1][tile_offset(r, u)]),
                  x_ok ? p.x_codes + (t0 + r) * p.k + col : p.x_codes, x_ok);
    }
  };

  const int64_t num_groups = kBlock ? (p.k + p.block - 1) / p.block : 1;
  const float* ws = kBlock ? p.w_scales + (n0 / p.block) * num_groups : nullptr;
  float total[2][4][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) copy_step(s, s);
    cp_async_commit();
  }
  for (int64_t step = 0; step < steps; ++step) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // this step's tiles are in; every warp is done with step - 1's stage
    const int64_t next = step + kStages - 1;
    if (next < steps) copy_step(static_cast<int>(next % kStages), next);
    cp_async_commit();
    const uint8_t* a = smem[step % kStages][0];
    const uint8_t* b = smem[step % kStages][1];
    float part[2][4][4] = {};
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // columns 64 h .. 64 h + 63 of the step
      uint4 lo[2], hi[2], bv[4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        lo[mi] = load_tile16(a, wn * 32 + mi * 16 + g, 4 * h + q);
        hi[mi] = load_tile16(a, wn * 32 + mi * 16 + g + 8, 4 * h + q);
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) bv[ni] = load_tile16(b, wt * 32 + ni * 8 + g, 4 * h + q);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_e4m3_k64(part[mi][ni], lo[mi], hi[mi], bv[ni]);
    }
    if (kBlock) {
      const int64_t kb = step * kTileK / p.block;
      const float wsc = ws[kb];
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int64_t t = t0 + wt * 32 + ni * 8 + 2 * q + j;
          const float s = t < p.rows ? p.x_scales[t * num_groups + kb] * wsc : 0.0f;
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) {
            total[mi][ni][j] += part[mi][ni][j] * s;
            total[mi][ni][j + 2] += part[mi][ni][j + 2] * s;
          }
        }
      }
    } else {
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
          for (int i = 0; i < 4; ++i) total[mi][ni][i] += part[mi][ni][i];
    }
  }
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = n0 + wn * 32 + mi * 16 + g + (i >= 2 ? 8 : 0);
        const int64_t t = t0 + wt * 32 + ni * 8 + 2 * q + (i & 1);
        if (row >= p.n || t >= p.rows) continue;
        float v = total[mi][ni][i];
        if (!kBlock) v = v * p.x_scales[t] * p.w_scales[row];
        if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, row);
        store_as_float(p.out, p.out_dtype, t * p.n + row, v);
      }
    }
  }
}

bool float_dtype(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16;
}

}  // namespace

bool fp8_gemm_supports(const Fp8LinearParams& p) {
  return p.rows >= 1 && p.n > 0 &&
         (p.n + kTileN - 1) / kTileN <= 65535 && p.k > 0 && p.k % 16 == 0 &&
         (p.block == 0 || (p.block > 0 && p.block % kTileK == 0)) && float_dtype(p.out_dtype) &&
         (p.bias == nullptr || float_dtype(p.bias_dtype)) && p.x_codes != nullptr &&
         p.x_scales != nullptr && p.w != nullptr && p.w_scales != nullptr && p.out != nullptr &&
         is_aligned(p.w, 16) && is_aligned(p.x_codes, 16);
}

cudaError_t launch_fp8_gemm(const Fp8LinearParams& p, cudaStream_t stream) {
  if (!fp8_gemm_supports(p)) return cudaErrorInvalidValue;
  const int64_t t_tiles = ceil_div(p.rows, kTileT), n_tiles = ceil_div(p.n, kTileN);
  // Activation tiles vary fastest: the CTAs resident together share weight tiles.
  const dim3 grid(static_cast<unsigned>(t_tiles), static_cast<unsigned>(n_tiles));
  if (p.block > 0) {
    launch_kernel(fp8_gemm_kernel<true>, grid, kThreads, 0, stream, p);
  } else {
    launch_kernel(fp8_gemm_kernel<false>, grid, kThreads, 0, stream, p);
  }
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
