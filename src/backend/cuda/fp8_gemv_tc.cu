// Decode products with an FP8 weight on tensor cores (fp8_linear_kernels.h):
// 1 .. 8 rows of activation codes read the weight once.
//
// A CTA of kWarps warps owns kTileRows = 16 output features and splits k
// among its warps in 64-column chunks (warp w takes chunks w, w + kWarps,
// ...). Per chunk, lane 4 g + q streams 16 codes of weight rows g and g + 8
// (columns 64 c + 16 q ..) and reads the same 16 columns of activation row
// g (zero for g >= rows), and two mma.sync m16n8k32 (fp8_mma.cuh) give the
// chunk's 16 x 8 products, which are added to f32 accumulators per chunk
// (f32 promotion every 64 columns: the tensor core's own accumulation is
// not IEEE f32). With block scales (a multiple of 64, so a chunk lies in one
// group and the 16 rows in one row block) each chunk is scaled by
// s[t, kb] * w_scale[n / B, kb] before it is added. The warps' sums meet in
// shared memory; per-row scales s_t * w_scale[n] and the bias follow.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/fp8_mma.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;
constexpr int kUnroll = 4;  // chunks in flight per warp

static_assert(kFp8GemvMaxRows == 8, "the mma's n = 8 holds every activation row");

// 3 CTAs per SM (at most 85 registers; the block variant spills 8 bytes):
// 396 resident CTAs on 132 SMs run the 8B's qkv (384 CTAs) in one wave.
template <bool kBlock>
__global__ void __launch_bounds__(kThreads, 3) fp8_gemv_tc_kernel(Fp8GemvParams p) {
  __shared__ float4 partial[kWarps][32];
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const bool lo_ok = n0 + g < p.n, hi_ok = n0 + g + 8 < p.n, x_ok = g < p.rows;
  const uint8_t* w_lo = p.w + (lo_ok ? n0 + g : 0) * p.k + 16 * q;
  const uint8_t* w_hi = p.w + (hi_ok ? n0 + g + 8 : 0) * p.k + 16 * q;
  const uint8_t* x = p.x_codes + (x_ok ? g : 0) * p.k + 16 * q;
  const int64_t chunks = (p.k + 63) / 64;
  // Block scales: this lane's activation rows 2q, 2q + 1 and the tile's row block.
  const int64_t num_groups = kBlock ? (p.k + p.block - 1) / p.block : 1;
  const float* ws = kBlock ? p.w_scales + (n0 / p.block) * num_groups : nullptr;
  const bool t0_ok = 2 * q < p.rows, t1_ok = 2 * q + 1 < p.rows;
  const float* xs0 = p.x_scales + (t0_ok ? 2 * q : 0) * num_groups;
  const float* xs1 = p.x_scales + (t1_ok ? 2 * q + 1 : 0) * num_groups;
  float acc[4] = {};
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int64_t c0 = warp; c0 < chunks; c0 += kWarps * kUnroll) {
    uint4 lo[kUnroll], hi[kUnroll], xv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t col = (c0 + u * kWarps) * 64;
      // k % 16 == 0: a lane's 16 columns are all in range or all out.
      const bool in = col + 16 * q < p.k;
      lo[u] = in && lo_ok ? load_stream(w_lo + col) : zero;
      hi[u] = in && hi_ok ? load_stream(w_hi + col) : zero;
      xv[u] = in && x_ok ? __ldg(reinterpret_cast<const uint4*>(x + col)) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * kWarps;
      if (c >= chunks) break;  // uniform over the warp: every lane runs each mma
      float d[4] = {};
      mma_e4m3_k64(d, lo[u], hi[u], xv[u]);
      if (kBlock) {
        const int64_t kb = c * 64 / p.block;
        const float s0 = t0_ok ? xs0[kb] * ws[kb] : 0.0f;
        const float s1 = t1_ok ? xs1[kb] * ws[kb] : 0.0f;
        acc[0] += d[0] * s0;
        acc[1] += d[1] * s1;
        acc[2] += d[2] * s0;
        acc[3] += d[3] * s1;
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] += d[i];
      }
    }
  }
  partial[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  __syncthreads();
  // Thread 4 l + i (< 128) finishes accumulator i of lane l: output feature
  // n0 + l / 4 (+ 8 for i >= 2), activation row 2 (l % 4) + i % 2.
  if (threadIdx.x >= 128) return;
  const int l = threadIdx.x >> 2, i = threadIdx.x & 3;
  const int64_t row = n0 + (l >> 2) + (i >= 2 ? 8 : 0);
  const int t = 2 * (l & 3) + (i & 1);
  if (row >= p.n || t >= p.rows) return;
  float v = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float4 f = partial[w][l];
    v += i == 0 ? f.x : i == 1 ? f.y : i == 2 ? f.z : f.w;
  }
  if (!kBlock) v = v * p.x_scales[t] * p.w_scales[row];
  if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, row);
  store_as_float(p.out, p.out_dtype, t * p.n + row, v);
}

}  // namespace

bool fp8_gemv_tc_supports(const Fp8GemvParams& p) {
  return fp8_gemv_supports(p) && p.k % 16 == 0 && is_aligned(p.w, 16) &&
         is_aligned(p.x_codes, 16) && (p.block == 0 || p.block % 64 == 0);
}

cudaError_t launch_fp8_gemv_tc(const Fp8GemvParams& p, cudaStream_t stream) {
  if (!fp8_gemv_tc_supports(p)) return cudaErrorInvalidValue;
  const int64_t blocks = ceil_div(p.n, kTileRows);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks));
  if (p.block > 0) {
    launch_kernel(fp8_gemv_tc_kernel<true>, grid, kThreads, 0, stream, p);
  } else {
    launch_kernel(fp8_gemv_tc_kernel<false>, grid, kThreads, 0, stream, p);
  }
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
