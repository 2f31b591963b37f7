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
// Batch-1 decode may pass the 16-bit row instead of its codes (kFused): each
// CTA then quantises the row into shared memory itself (fp8_quant.cuh: the
// codes and scales of launch_fp8_quantize) after issuing its first weight
// loads, which saves the quantise kernel and its launch; the row is re-read
// by every CTA from L2 (2 k bytes per 16 k weight bytes).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/fp8_mma.cuh"
#include "backend/cuda/fp8_quant.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;
constexpr int kUnroll = 4;  // chunks in flight per warp

static_assert(kFp8GemvMaxRows == 8, "the mma's n = 8 holds every activation row");

// The one activation row quantised by the kernel itself (kFused): codes and
// scales exactly as launch_fp8_quantize writes them (fp8_quant.cuh).
template <typename T, bool kBlock>
__device__ __forceinline__ void quantize_own_row(const Fp8LinearParams& p, uint8_t* codes,
                                                 float* scales) {
  const T* x = static_cast<const T*>(p.x);
  if (!kBlock) {
    float s = 0.0f;
    if (p.input_scale != nullptr) {
      s = *p.input_scale;
    } else {
      float amax = 0.0f;
      for (int64_t i = threadIdx.x; i < p.k; i += kThreads)
        amax = fmaxf(amax, fabsf(to_float(x[i])));
      s = fp8_token_scale_dev(block_max(amax));
    }
    if (threadIdx.x == 0) scales[0] = s;
    for (int64_t i = threadIdx.x; i < p.k; i += kThreads) codes[i] = fp8_code(to_float(x[i]), s);
  } else {
    const int lane = threadIdx.x & 31;
    const int64_t num_groups = (p.k + p.block - 1) / p.block;
    for (int64_t gi = threadIdx.x >> 5; gi < num_groups; gi += kWarps) {
      const int64_t c0 = gi * p.block, c1 = c0 + p.block < p.k ? c0 + p.block : p.k;
      float amax = 0.0f;
      for (int64_t i = c0 + lane; i < c1; i += 32) amax = fmaxf(amax, fabsf(to_float(x[i])));
      const float s = fp8_group_scale_dev(warp_max(amax));
      if (lane == 0) scales[gi] = s;
      for (int64_t i = c0 + lane; i < c1; i += 32) codes[i] = fp8_code(to_float(x[i]), s);
    }
  }
  __syncthreads();
}

// 2 CTAs per SM (at most 128 registers; with 3 the kernel spills): 16 warps
// of an SM keep 16 x 32 x 128 bytes of weight loads in flight. kFused
// (rows == 1): the first weight loads are issued before the kernel quantises
// its activation row into shared memory, so the quantisation overlaps them.
template <bool kBlock, bool kFused, typename T>
__global__ void __launch_bounds__(kThreads, 2) fp8_gemv_tc_kernel(Fp8LinearParams p) {
  __shared__ float4 partial[kWarps][32];
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const bool lo_ok = n0 + g < p.n, hi_ok = n0 + g + 8 < p.n, x_ok = g < p.rows;
  const uint8_t* w_lo = p.w + (lo_ok ? n0 + g : 0) * p.k + 16 * q;
  const uint8_t* w_hi = p.w + (hi_ok ? n0 + g + 8 : 0) * p.k + 16 * q;
  const int64_t chunks = (p.k + 63) / 64;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 lo[kUnroll], hi[kUnroll];
  auto load_weights = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t col = (c0 + u * kWarps) * 64;
      // k % 16 == 0: a lane's 16 columns are all in range or all out.
      const bool in = col + 16 * q < p.k;
      lo[u] = in && lo_ok ? load_stream(w_lo + col) : zero;
      hi[u] = in && hi_ok ? load_stream(w_hi + col) : zero;
    }
  };
  load_weights(warp);
  // The activation codes [rows, k] and scales [rows, num_groups].
  const uint8_t* x_codes = p.x_codes;
  const float* x_scales = p.x_scales;
  if constexpr (kFused) {
    __shared__ __align__(16) uint8_t own_codes[kFp8GemvFusedMaxK];
    __shared__ float own_scales[kFp8GemvFusedMaxK / 64];
    quantize_own_row<T, kBlock>(p, own_codes, own_scales);
    x_codes = own_codes;
    x_scales = own_scales;
  }
  const uint8_t* x = x_codes + (x_ok ? g : 0) * p.k + 16 * q;
  // Block scales: this lane's activation rows 2q, 2q + 1 and the tile's row block.
  const int64_t num_groups = kBlock ? (p.k + p.block - 1) / p.block : 1;
  const float* ws = kBlock ? p.w_scales + (n0 / p.block) * num_groups : nullptr;
  const bool t0_ok = 2 * q < p.rows, t1_ok = 2 * q + 1 < p.rows;
  const float* xs0 = x_scales + (t0_ok ? 2 * q : 0) * num_groups;
  const float* xs1 = x_scales + (t1_ok ? 2 * q + 1 : 0) * num_groups;
  float acc[4] = {};
  for (int64_t c0 = warp; c0 < chunks; c0 += kWarps * kUnroll) {
    if (c0 != warp) load_weights(c0);
    uint4 xv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t col = (c0 + u * kWarps) * 64;
      const bool in = x_ok && col + 16 * q < p.k;
      if constexpr (kFused) {
        xv[u] = in ? *reinterpret_cast<const uint4*>(x + col) : zero;
      } else {
        xv[u] = in ? __ldg(reinterpret_cast<const uint4*>(x + col)) : zero;
      }
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
  if (!kBlock) v = v * x_scales[t] * p.w_scales[row];
  if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, row);
  store_as_float(p.out, p.out_dtype, t * p.n + row, v);
}

template <bool kFused, typename T>
void launch_blocked(const Fp8LinearParams& p, dim3 grid, cudaStream_t stream) {
  if (p.block > 0) {
    launch_kernel(fp8_gemv_tc_kernel<true, kFused, T>, grid, kThreads, 0, stream, p);
  } else {
    launch_kernel(fp8_gemv_tc_kernel<false, kFused, T>, grid, kThreads, 0, stream, p);
  }
}

}  // namespace

bool fp8_gemv_tc_supports(const Fp8LinearParams& p) {
  const bool fused_ok =
      p.x == nullptr || (p.rows == 1 && p.k <= kFp8GemvFusedMaxK &&
                         (p.x_dtype == DType::kBF16 || p.x_dtype == DType::kF16) &&
                         (p.input_scale == nullptr || p.block == 0));
  return fp8_gemv_supports(p) && p.k % 16 == 0 && is_aligned(p.w, 16) &&
         is_aligned(p.x_codes, 16) && (p.block == 0 || p.block % 64 == 0) && fused_ok;
}

cudaError_t launch_fp8_gemv_tc(const Fp8LinearParams& p, cudaStream_t stream) {
  if (!fp8_gemv_tc_supports(p)) return cudaErrorInvalidValue;
  const int64_t blocks = ceil_div(p.n, kTileRows);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks));
  if (p.x == nullptr) {
    launch_blocked<false, bf16>(p, grid, stream);
  } else if (p.x_dtype == DType::kBF16) {
    launch_blocked<true, bf16>(p, grid, stream);
  } else {
    launch_blocked<true, f16>(p, grid, stream);
  }
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
