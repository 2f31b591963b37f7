// Activation quantisation of the FP8 linear (fp8_linear_kernels.h).
//
// Per token: one CTA of 1024 threads per row reduces max|x| over the row,
// then every thread writes its elements' codes; with k % 8 == 0, x 16-byte
// and the codes 8-byte aligned (kVec) a thread takes 8-element runs: one
// 16-byte load, one 8-byte store (the same values and codes as element by
// element: the max does not depend on the order). Per group: one warp per
// (row, group), its scale stored at [row, group] (or [group, row] with
// scales_by_group).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/fp8_quant.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kRowThreads = 1024;
constexpr int kGroupWarps = 8;

template <typename T, bool kVec>
__global__ void __launch_bounds__(kRowThreads) quantize_rows_kernel(Fp8QuantizeParams p) {
  pdl_enter();
  const int64_t row = blockIdx.x;
  const T* x = static_cast<const T*>(p.x) + row * p.k;
  const uint4* x_runs = reinterpret_cast<const uint4*>(x);
  const int64_t runs = p.k / 8;
  float s = 0.0f;
  if (p.input_scale != nullptr) {
    s = *p.input_scale;
  } else {
    float amax = 0.0f;
    if constexpr (kVec) {
      for (int64_t r = threadIdx.x; r < runs; r += blockDim.x) {
        const uint4 v = x_runs[r];
        const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
        for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(to_float(e[j])));
      }
    } else {
      for (int64_t i = threadIdx.x; i < p.k; i += blockDim.x)
        amax = fmaxf(amax, fabsf(to_float(x[i])));
    }
    s = fp8_token_scale_dev(block_max(amax));
  }
  if (threadIdx.x == 0) p.scales[row] = s;
  uint8_t* out = p.codes + row * p.k;
  if constexpr (kVec) {
    for (int64_t r = threadIdx.x; r < runs; r += blockDim.x) {
      const uint4 v = x_runs[r];
      const T* e = reinterpret_cast<const T*>(&v);
      uint32_t packed[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        packed[h] = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          packed[h] |= static_cast<uint32_t>(fp8_code(to_float(e[4 * h + j]), s)) << (8 * j);
      }
      reinterpret_cast<uint2*>(out)[r] = make_uint2(packed[0], packed[1]);
    }
  } else {
    for (int64_t i = threadIdx.x; i < p.k; i += blockDim.x) out[i] = fp8_code(to_float(x[i]), s);
  }
}

template <typename T>
__global__ void __launch_bounds__(kGroupWarps * 32) quantize_groups_kernel(Fp8QuantizeParams p) {
  pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t num_groups = (p.k + p.group - 1) / p.group;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kGroupWarps + (threadIdx.x >> 5);
  if (item >= p.rows * num_groups) return;
  const int64_t row = item / num_groups, g = item % num_groups;
  const int64_t c0 = g * p.group, c1 = c0 + p.group < p.k ? c0 + p.group : p.k;
  const T* x = static_cast<const T*>(p.x) + row * p.k;
  float amax = 0.0f;
  for (int64_t i = c0 + lane; i < c1; i += 32) amax = fmaxf(amax, fabsf(to_float(x[i])));
  const float s = fp8_group_scale_dev(warp_max(amax));
  if (lane == 0) p.scales[p.scales_by_group ? g * p.rows + row : item] = s;
  uint8_t* out = p.codes + row * p.k;
  for (int64_t i = c0 + lane; i < c1; i += 32) out[i] = fp8_code(to_float(x[i]), s);
}

}  // namespace

cudaError_t launch_fp8_quantize(const Fp8QuantizeParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.k <= 0 || p.group < 0 || (p.group > 0 && p.input_scale != nullptr) ||
      (p.group == 0 && p.scales_by_group) || p.rows > 0x7fffffff)
    return cudaErrorInvalidValue;
  return dispatch_half(p.dtype, [&](auto t) {
    using T = decltype(t);
    if (p.group == 0) {
      const bool vec = p.k % 8 == 0 && is_aligned(p.x, 16) && is_aligned(p.codes, 8);
      launch_kernel(vec ? quantize_rows_kernel<T, true> : quantize_rows_kernel<T, false>,
                    dim3(static_cast<unsigned>(p.rows)), kRowThreads, 0, stream, p);
    } else {
      const int64_t blocks = ceil_div(p.rows * ceil_div(p.k, p.group), kGroupWarps);
      if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
      launch_kernel(quantize_groups_kernel<T>, dim3(static_cast<unsigned>(blocks)),
                    kGroupWarps * 32, 0, stream, p);
    }
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
