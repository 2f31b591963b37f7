// The activation quantisation rules of core/fp8_quant.h on the device, shared
// by launch_fp8_quantize and the decode kernel that quantises its own row
// (fp8_linear_kernels.h): the same scales and codes bit for bit. Included
// only by .cu files of backend/cuda.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace pagoda::cuda {

constexpr float kFp8E4M3Max = 448.0f;
constexpr float kFp8MinTokenScaleDev = 1.0f / (448.0f * 512.0f);  // kFp8MinTokenScale
constexpr float kFp8MinGroupAmaxDev = 1e-10f;                     // kFp8MinGroupAmax

// e4m3(x / s): IEEE division, round to nearest even, saturating at +-448.
__device__ __forceinline__ uint8_t fp8_code(float x, float s) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(x, s), __NV_SATFINITE, __NV_E4M3));
}

// fp8_token_scale: max(amax / 448, 1 / (448 * 512)).
__device__ __forceinline__ float fp8_token_scale_dev(float amax) {
  return fmaxf(__fdiv_rn(amax, kFp8E4M3Max), kFp8MinTokenScaleDev);
}

// fp8_group_scale: max(amax, 1e-10) / 448.
__device__ __forceinline__ float fp8_group_scale_dev(float amax) {
  return __fdiv_rn(fmaxf(amax, kFp8MinGroupAmaxDev), kFp8E4M3Max);
}

// The maximum of x over the CTA (every thread calls it; all get the result).
__device__ __forceinline__ float block_max(float x) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  x = warp_max(x);
  __syncthreads();
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  x = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0f;
  return warp_max(x);
}

// codes[0..kVec) = e4m3(o.v[j] / s): kVec == 8 as one 8-byte store (codes
// 8-byte aligned: the launchers' rule), else kVec == 1.
template <typename T, int kVec>
__device__ __forceinline__ void store_codes(const Vec<T, kVec>& o, float s, uint8_t* codes) {
  static_assert(kVec == 8 || kVec == 1, "8-code stores or single codes");
  if constexpr (kVec == 8) {
    uint32_t packed[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 8; ++j)
      packed[j / 4] |= static_cast<uint32_t>(fp8_code(to_float(o.v[j]), s)) << (8 * (j % 4));
    *reinterpret_cast<uint2*>(codes) = make_uint2(packed[0], packed[1]);
  } else {
    codes[0] = fp8_code(to_float(o.v[0]), s);
  }
}

// The wide-row producers' second pass (rows too wide to keep in registers):
// the CTA's threads write codes[i] = e4m3(row[i] / s) for the row of
// num_vec * kVec elements they just stored (re-read as stored, T).
template <typename T, int kVec>
__device__ __forceinline__ void store_row_codes(const T* row, int64_t num_vec, float s,
                                                uint8_t* codes) {
  for (int64_t i = threadIdx.x; i < num_vec; i += blockDim.x)
    store_codes<T, kVec>(load_vec<T, kVec>(row + i * kVec), s, codes + i * kVec);
}

}  // namespace pagoda::cuda
