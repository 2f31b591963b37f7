// Decode products with a block-format weight (quant_linear_kernels.h).
//
// A CTA of kWarps warps owns kWarps output features (one row of w each).
// Each warp walks its row in stages of kStageBlocks blocks (128 32-element
// units: 4 per lane): the stage's bytes (a multiple of 16: kStageBlocks is a
// multiple of 16) are copied into the warp's shared-memory slice with
// 16-byte streaming loads when the row is 16-byte aligned (else byte loads),
// then lane l dequantizes units l, l + 32, l + 64, l + 96 of the stage into
// registers and dots each with the same 32 columns of every x row. Partial
// sums are reduced across the warp at the end. x rows (at most 8) stay in
// L1/L2, shared by all warps.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/quant_blocks.cuh"
#include "backend/cuda/quant_linear_kernels.h"
#include "backend/cuda/stream_load.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kUnitsPerLane = 4;
constexpr int kStageUnits = 32 * kUnitsPerLane;

template <DType F>
struct Stage {
  static constexpr int kBlocks = kStageUnits / BlockFormat<F>::kUnits;  // 128 or 16
  static constexpr int kBytes = kBlocks * BlockFormat<F>::kBytes;
  static_assert(kBytes % 16 == 0, "a stage is whole 16-byte chunks");
};

__device__ __forceinline__ void unpack8(const uint4& v, bf16, float (&f)[8]) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u[i]));
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
__device__ __forceinline__ void unpack8(const uint4& v, f16, float (&f)[8]) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}


template <typename T, DType F, bool kVector>
__global__ void __launch_bounds__(kThreads) quant_gemv_kernel(QuantGemvParams p) {
  using Fmt = BlockFormat<F>;
  __shared__ __align__(16) uint8_t stage_bytes[kWarps][Stage<F>::kBytes];
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (row >= p.n) return;  // whole warps only: no block-wide barrier below
  const int64_t blocks_per_row = p.k / Fmt::kElems;
  const size_t row_bytes = static_cast<size_t>(blocks_per_row) * Fmt::kBytes;
  const uint8_t* w = static_cast<const uint8_t*>(p.w) + static_cast<size_t>(row) * row_bytes;
  const T* x = static_cast<const T*>(p.x);
  uint8_t* smem = stage_bytes[warp];
  float acc[kQuantGemvMaxRows] = {};
  for (int64_t b0 = 0; b0 < blocks_per_row; b0 += Stage<F>::kBlocks) {
    const int num_blocks = static_cast<int>(
        blocks_per_row - b0 < Stage<F>::kBlocks ? blocks_per_row - b0 : Stage<F>::kBlocks);
    const int bytes = num_blocks * Fmt::kBytes;
    const uint8_t* src = w + static_cast<size_t>(b0) * Fmt::kBytes;
    __syncwarp();   // the previous stage's reads are done
    if (kVector) {  // bytes is a multiple of 16 (row_bytes and the stage are)
      for (int c = lane; c < bytes / 16; c += 32)
        *reinterpret_cast<uint4*>(smem + 16 * c) = load_stream(src + 16 * c);
    } else {
      for (int c = lane; c < bytes; c += 32) smem[c] = src[c];
    }
    __syncwarp();
    const int num_units = num_blocks * Fmt::kUnits;
#pragma unroll
    for (int i = 0; i < kUnitsPerLane; ++i) {
      const int unit = lane + 32 * i;
      if (unit >= num_units) break;
      float wf[32];
      dequant_unit<F>(smem + (unit / Fmt::kUnits) * Fmt::kBytes, unit % Fmt::kUnits, wf);
      const int64_t col = (b0 * Fmt::kUnits + unit) * 32;
#pragma unroll
      for (int m = 0; m < kQuantGemvMaxRows; ++m) {
        if (m >= p.rows) break;
        const uint4* xr = reinterpret_cast<const uint4*>(x + m * p.k + col);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          float xf[8];
          unpack8(__ldg(xr + c), T{}, xf);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m] = fmaf(wf[8 * c + e], xf[e], acc[m]);
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < kQuantGemvMaxRows; ++m) {
    if (m >= p.rows) break;
    float v = warp_sum(acc[m]);
    if (lane == 0) {
      if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, row);
      const int64_t o = m * p.n + row;
      if (p.out_dtype == DType::kF32) {
        static_cast<float*>(p.out)[o] = v;
      } else {
        static_cast<T*>(p.out)[o] = from_float<T>(v);
      }
    }
  }
}

template <typename T, DType F>
cudaError_t launch_format(const QuantGemvParams& p, cudaStream_t stream) {
  if constexpr (is_group_dtype(F)) {
    return cudaErrorInvalidValue;  // the group formats: group_gemv.cu
  } else {
    const int64_t blocks = ceil_div(p.n, kWarps);
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    const size_t row_bytes = dtype_nbytes(F, p.k);
    const bool vector = row_bytes % 16 == 0 && is_aligned(p.w, 16);
    const dim3 grid(static_cast<unsigned>(blocks));
    if (vector) {
      launch_kernel(quant_gemv_kernel<T, F, true>, grid, kThreads, 0, stream, p);
    } else {
      launch_kernel(quant_gemv_kernel<T, F, false>, grid, kThreads, 0, stream, p);
    }
    return cudaGetLastError();
  }
}

}  // namespace

bool quant_gemv_supports(const QuantGemvParams& p) {
  if (p.w_tiles) return false;  // the tile layout (w4_tiles.h): launch_w4_tile_gemv only
  const bool in_ok = p.dtype == DType::kBF16 || p.dtype == DType::kF16;
  const bool out_ok = p.out_dtype == p.dtype || p.out_dtype == DType::kF32;
  const bool bias_ok = p.bias == nullptr || p.bias_dtype == DType::kF32 ||
                       p.bias_dtype == DType::kBF16 || p.bias_dtype == DType::kF16;
  return in_ok && out_ok && bias_ok && is_block_dtype(p.w_dtype) && !is_group_dtype(p.w_dtype) &&
         p.rows >= 1 && p.rows <= kQuantGemvMaxRows && p.n > 0 && p.k > 0 &&
         p.k % dtype_block_elems(p.w_dtype) == 0 && is_aligned(p.x, 16) && is_aligned(p.w, 2);
}

cudaError_t launch_quant_gemv(const QuantGemvParams& p, cudaStream_t stream) {
  if (!quant_gemv_supports(p)) return cudaErrorInvalidValue;
  return dispatch_half(p.dtype, [&](auto t) {
    return dispatch_block_dtype(p.w_dtype, [&](auto f) {
      return launch_format<decltype(t), decltype(f)::value>(p, stream);
    });
  });
}

}  // namespace pagoda::cuda
