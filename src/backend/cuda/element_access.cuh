// Element access shared by kernels whose pointers' alignment or dtype is
// known only at run time (cuda_common.cuh has the aligned Vec accesses).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "core/dtype.h"

namespace pagoda::cuda {

// load_vec / store_vec when kAligned (p 16-byte aligned), else element by
// element (the same values, for pointers of unknown alignment).
template <typename T, int N, bool kAligned>
__device__ __forceinline__ Vec<T, N> load_vec_any(const T* p) {
  if constexpr (kAligned) {
    return load_vec<T, N>(p);
  } else {
    Vec<T, N> v;
#pragma unroll
    for (int k = 0; k < N; ++k) v.v[k] = p[k];
    return v;
  }
}
template <typename T, int N, bool kAligned>
__device__ __forceinline__ void store_vec_any(T* p, const Vec<T, N>& v) {
  if constexpr (kAligned) {
    store_vec<T, N>(p, v);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = v.v[k];
  }
}

// Element i of an f32, bf16 or f16 (any other dtype) array, as float: biases
// and scales whose dtype is a runtime value.
__device__ __forceinline__ float load_as_float(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBF16: return to_float(static_cast<const bf16*>(p)[i]);
    default: return to_float(static_cast<const f16*>(p)[i]);
  }
}

// Writes v rounded to an f32, bf16 or f16 (any other dtype) array's element i.
__device__ __forceinline__ void store_as_float(void* p, DType dt, int64_t i, float v) {
  switch (dt) {
    case DType::kF32:
      static_cast<float*>(p)[i] = v;
      break;
    case DType::kBF16:
      static_cast<bf16*>(p)[i] = from_float<bf16>(v);
      break;
    default:
      static_cast<f16*>(p)[i] = from_float<f16>(v);
      break;
  }
}

}  // namespace pagoda::cuda
