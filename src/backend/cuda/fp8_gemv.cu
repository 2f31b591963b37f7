// Decode products with an FP8 weight (fp8_linear_kernels.h): the kernel
// PAGODA_FP8_GEMV picks where it applies: by default the CUDA-core one
// (fp8_gemv_rows.cu) for exactly 1 row and the tensor-core one
// (fp8_gemv_tc.cu) for 2 .. 8 rows, the faster at each T on an H100
// (kernel_bench --fp8-gemv); "tc" the tensor-core one everywhere, "rows"
// the CUDA-core one up to kFp8GemvRowsMaxRows rows. Where the chosen kernel
// does not apply the other runs if it may (not rows under "tc"), else this
// f32 kernel.
//
// A CTA of kWarps warps owns kWarps output features (one weight row each).
// Lane l of a warp reads 16 codes at columns 16 l + 512 i of its row with a
// streaming 16-byte load (kVector: k % 16 == 0 and 16-byte aligned rows),
// converts them to f32 (e4m3 -> f16 is exact) and dots them with the same
// 16 columns of every row's activation codes (kept in L1 / L2: at most 8
// rows). With block scales a lane's 16 columns lie in one group (the block
// is a multiple of 16), so each lane partial is scaled by s[t, g] *
// w_scale[n / B, g] before it is added; per-row scales multiply the warp's
// sum once. The byte path (k % 16 != 0) walks one column per lane.
#include <cuda_fp8.h>

#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/fp8_mma.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

__device__ __forceinline__ float e4m3_value(uint8_t c) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, __NV_E4M3)));
}

template <bool kVector, bool kBlock>
__global__ void __launch_bounds__(kThreads) fp8_gemv_kernel(Fp8LinearParams p) {
  pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= p.n) return;  // whole warps only: no block-wide barrier below
  const uint8_t* w = p.w + row * p.k;
  const int64_t num_groups = kBlock ? (p.k + p.block - 1) / p.block : 1;
  const float* ws = kBlock ? p.w_scales + (row / p.block) * num_groups : nullptr;
  float acc[kFp8GemvMaxRows] = {};
  if (kVector) {
    for (int64_t c = 16 * lane; c < p.k; c += 512) {
      float wf[16];
      unpack16(load_stream(w + c), wf);
#pragma unroll
      for (int m = 0; m < kFp8GemvMaxRows; ++m) {
        if (m >= p.rows) break;
        float xf[16];
        unpack16(__ldg(reinterpret_cast<const uint4*>(p.x_codes + m * p.k + c)), xf);
        float part = 0.0f;
#pragma unroll
        for (int e = 0; e < 16; ++e) part = fmaf(wf[e], xf[e], part);
        if (kBlock) {
          const int64_t g = c / p.block;
          part *= p.x_scales[m * num_groups + g] * ws[g];
        }
        acc[m] += part;
      }
    }
  } else {
    for (int64_t c = lane; c < p.k; c += 32) {
      const float wf = e4m3_value(w[c]);
#pragma unroll
      for (int m = 0; m < kFp8GemvMaxRows; ++m) {
        if (m >= p.rows) break;
        float part = wf * e4m3_value(p.x_codes[m * p.k + c]);
        if (kBlock) {
          const int64_t g = c / p.block;
          part *= p.x_scales[m * num_groups + g] * ws[g];
        }
        acc[m] += part;
      }
    }
  }
#pragma unroll
  for (int m = 0; m < kFp8GemvMaxRows; ++m) {
    if (m >= p.rows) break;
    float v = warp_sum(acc[m]);
    if (lane == 0) {
      if (!kBlock) v = v * p.x_scales[m] * p.w_scales[row];
      if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, row);
      store_as_float(p.out, p.out_dtype, m * p.n + row, v);
    }
  }
}

template <bool kVector>
void launch_mode(const Fp8LinearParams& p, dim3 grid, cudaStream_t stream) {
  if (p.block > 0) {
    launch_kernel(fp8_gemv_kernel<kVector, true>, grid, kThreads, 0, stream, p);
  } else {
    launch_kernel(fp8_gemv_kernel<kVector, false>, grid, kThreads, 0, stream, p);
  }
}

bool float_dtype(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16;
}

}  // namespace

bool fp8_gemv_supports(const Fp8LinearParams& p) {
  return p.rows >= 1 && p.rows <= kFp8GemvMaxRows && p.n > 0 && p.k > 0 &&
         (p.block == 0 || (p.block > 0 && p.block % 16 == 0)) && float_dtype(p.out_dtype) &&
         (p.bias == nullptr || float_dtype(p.bias_dtype)) && p.x_codes != nullptr &&
         p.x_scales != nullptr && p.w != nullptr && p.w_scales != nullptr && p.out != nullptr;
}

Fp8GemvVariant fp8_gemv_variant() {
  static const Fp8GemvVariant v = [] {
    const char* env = std::getenv("PAGODA_FP8_GEMV");
    if (env == nullptr) return Fp8GemvVariant::kAuto;
    if (std::strcmp(env, "tc") == 0) return Fp8GemvVariant::kTc;
    if (std::strcmp(env, "rows") == 0) return Fp8GemvVariant::kRows;
    return Fp8GemvVariant::kAuto;
  }();
  return v;
}

cudaError_t launch_fp8_gemv(const Fp8LinearParams& p, cudaStream_t stream) {
  if (!fp8_gemv_supports(p)) return cudaErrorInvalidValue;
  const Fp8GemvVariant v = fp8_gemv_variant();
  const bool tc_ok = fp8_gemv_tc_supports(p);
  const bool rows_ok = v != Fp8GemvVariant::kTc && fp8_gemv_rows_supports(p);
  const bool rows_first = v == Fp8GemvVariant::kRows || p.rows == 1;
  if (rows_ok && (rows_first || !tc_ok)) return launch_fp8_gemv_rows(p, stream);
  if (tc_ok) return launch_fp8_gemv_tc(p, stream);
  if (p.x != nullptr) return cudaErrorInvalidValue;  // only the tensor-core kernel quantises
  const int64_t blocks = ceil_div(p.n, kWarps);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks));
  const bool vector = p.k % 16 == 0 && is_aligned(p.w, 16) && is_aligned(p.x_codes, 16);
  if (vector) {
    launch_mode<true>(p, grid, stream);
  } else {
    launch_mode<false>(p, grid, stream);
  }
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
