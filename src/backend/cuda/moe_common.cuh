// Device helpers shared by the two fused expert paths (moe_decode.cu,
// moe_grouped.cu): the SwiGLU epilogue with silu_mul's rounding, and
// 16-byte weight loads.
#pragma once

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/stream_load.cuh"

namespace pagoda::cuda {

// act = round(round(silu(g)) * u) from the gate and up dot products (f32),
// each first rounded to T: exactly silu_mul applied to a rounded gate_up row.
template <typename T>
__device__ __forceinline__ T moe_silu_mul(float gate, float up) {
  const float g = to_float(from_float<T>(gate));
  const float u = to_float(from_float<T>(up));
  const float s = to_float(from_float<T>(g / (1.0f + expf(-g))));
  return from_float<T>(s * u);
}

__device__ __forceinline__ float2 moe_unpack2(uint32_t v, bf16) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}
__device__ __forceinline__ float2 moe_unpack2(uint32_t v, f16) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}

// Eight 16-bit values of type T packed in 16 bytes, widened to f32.
template <typename T>
__device__ __forceinline__ void moe_unpack8(const uint4& v, float (&f)[8]) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = moe_unpack2(u[i], T{});
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

}  // namespace pagoda::cuda
