// Device helpers shared by the CUDA kernel families: 16-bit float
// conversions, vector loads, warp and block reductions, dtype dispatch.
// Included only by .cu files of backend/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

using bf16 = __nv_bfloat16;
using f16 = __half;

__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(f16 x) { return __half2float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }

// Round-to-nearest-even, like torch's .to(dtype) and core/half.h.
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ f16 from_float<f16>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }

// N elements moved as one aligned access (N * sizeof(T) bytes, at most 16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}
template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
  *reinterpret_cast<Vec<T, N>*>(p) = v;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Sum over the block; every thread gets the result. blockDim.x must be a
// multiple of 32 (at most 1024). Contains __syncthreads: call from all threads.
__device__ __forceinline__ float block_sum(float x) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int num_warps = blockDim.x >> 5;
  x = warp_sum(x);
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  x = lane < num_warps ? partial[lane] : 0.0f;
  return warp_sum(x);
}

// True when p is aligned to `bytes`.
inline bool is_aligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) % bytes) == 0;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Calls f(T{}) with T the CUDA type of a 16-bit float dtype; returns
// cudaErrorInvalidValue for other dtypes.
template <typename F>
cudaError_t dispatch_half(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16: return f(bf16{});
    case DType::kF16: return f(f16{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace pagoda::cuda
