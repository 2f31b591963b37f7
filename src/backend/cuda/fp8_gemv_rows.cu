// Decode products with an FP8 weight for 1 or 2 activation rows on CUDA
// cores (fp8_linear_kernels.h, launch_fp8_gemv_rows): the skinny structure
// of the bf16 kernel (gemv_kernels.cu) on e4m3 codes.
//
// A warp owns kRowsPerWarp weight rows over the whole k; lane l takes the
// 16-column chunks l, l + 32, ... of each, so one load instruction of a warp
// reads 512 contiguous bytes of one row, and each lane issues kUnroll chunk
// loads per weight row before using any (kRowsPerWarp * kUnroll * 512 bytes
// in flight per warp). Codes convert to f32 exactly (e4m3 -> f16 -> f32;
// per 16 weight bytes: 8 cvt to f16x2, 16 to f32, then 16 FFMA per row) and
// every activation row's chunk (L1 / L2) is converted once per warp and
// shared by its weight rows. With block scales (a multiple of 16: a chunk
// lies in one group) each chunk's partial is scaled by s[t, kb] *
// w_scale[n / B, kb]; per-row scales multiply the warp's sum once; then the
// bias.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/fp8_mma.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 2;
constexpr int kUnroll = 4;

static_assert(kFp8GemvRowsMaxRows * kRowsPerWarp <= 32, "one writing lane per output");

template <bool kBlock, int kRows>
__global__ void __launch_bounds__(kThreads) fp8_gemv_rows_kernel(Fp8LinearParams p) {
  pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t n0 =
      (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  if (n0 >= p.n) return;  // whole warps only: no block-wide barrier below
  const int64_t chunks = p.k / 16;
  const int64_t num_groups = kBlock ? (p.k + p.block - 1) / p.block : 1;
  const uint8_t* w[kRowsPerWarp];
  const float* ws[kRowsPerWarp];
  bool row_ok[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    row_ok[r] = n0 + r < p.n;
    const int64_t row = row_ok[r] ? n0 + r : n0;
    w[r] = p.w + row * p.k;
    ws[r] = kBlock ? p.w_scales + (row / p.block) * num_groups : nullptr;
  }
  float acc[kRows][kRowsPerWarp] = {};
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
    uint4 wv[kUnroll][kRowsPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        wv[u][r] = c < chunks && row_ok[r] ? load_stream(w[r] + c * 16) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= chunks) break;
      float wf[kRowsPerWarp][16];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) unpack16(wv[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        float xf[16];
        unpack16(__ldg(reinterpret_cast<const uint4*>(p.x_codes + m * p.k + c * 16)), xf);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          float part = 0.0f;
#pragma unroll
          for (int e = 0; e < 16; ++e) part = fmaf(wf[r][e], xf[e], part);
          if (kBlock) {
            const int64_t kb = c * 16 / p.block;
            part *= p.x_scales[m * num_groups + kb] * ws[r][kb];
          }
          acc[m][r] += part;
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float v = warp_sum(acc[m][r]);
      if (lane == m * kRowsPerWarp + r && row_ok[r]) {
        const int64_t j = n0 + r;
        if (!kBlock) v = v * p.x_scales[m] * p.w_scales[j];
        if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, j);
        store_as_float(p.out, p.out_dtype, m * p.n + j, v);
      }
    }
  }
}

template <int kRows>
void launch_rows(const Fp8LinearParams& p, dim3 grid, cudaStream_t stream) {
  if (p.block > 0) {
    launch_kernel(fp8_gemv_rows_kernel<true, kRows>, grid, kThreads, 0, stream, p);
  } else {
    launch_kernel(fp8_gemv_rows_kernel<false, kRows>, grid, kThreads, 0, stream, p);
  }
}

}  // namespace

bool fp8_gemv_rows_supports(const Fp8LinearParams& p) {
  return fp8_gemv_supports(p) && p.x == nullptr && p.rows <= kFp8GemvRowsMaxRows &&
         p.k % 16 == 0 && is_aligned(p.w, 16) && is_aligned(p.x_codes, 16);
}

cudaError_t launch_fp8_gemv_rows(const Fp8LinearParams& p, cudaStream_t stream) {
  if (!fp8_gemv_rows_supports(p)) return cudaErrorInvalidValue;
  const int64_t blocks = ceil_div(p.n, kWarps * kRowsPerWarp);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks));
  static_assert(kFp8GemvRowsMaxRows == 2, "one instance per row count");
  if (p.rows == 1) {
    launch_rows<1>(p, grid, stream);
  } else {
    launch_rows<2>(p, grid, stream);
  }
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
