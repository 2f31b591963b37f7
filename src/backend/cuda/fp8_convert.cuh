// Device conversions of the FP8 KV cache (e4m3fn, core/fp8.h is the
// specification): float -> e4m3 for the cache write, e4m3 -> bf16 / f16 for
// the attention tiles. Included only by .cu files of backend/cuda.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"

namespace pagoda::cuda {

// The FP8 cache's element type, as a template argument of the attention
// kernels (KV = T for a 16-bit cache).
using fp8_e4m3 = __nv_fp8_e4m3;

template <typename KV>
inline constexpr bool kIsFp8 = sizeof(KV) == 1;

// Round to nearest even, saturating to +-448, NaN kept: bit-exact with
// core/fp8.h's float_to_e4m3.
__device__ __forceinline__ uint8_t float_to_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// Eight e4m3 values (bytes 0..7 of `q`, little-endian) as eight T values in
// 16 bytes, exactly: every e4m3 value is representable in bf16 and f16.
template <typename T>
__device__ __forceinline__ uint4 e4m3x8_to(uint2 q) {
  uint32_t out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t word = i < 2 ? q.x : q.y;
    const auto pair = static_cast<__nv_fp8x2_storage_t>((word >> (16 * (i & 1))) & 0xffffu);
    const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
    if constexpr (std::is_same_v<T, f16>) {
      out[i] = static_cast<uint32_t>(raw.x) | (static_cast<uint32_t>(raw.y) << 16);
    } else {
      const float2 f = __half22float2(__half2(raw));
      const __nv_bfloat162 b = __float22bfloat162_rn(f);
      out[i] = *reinterpret_cast<const uint32_t*>(&b);
    }
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// Two e4m3 values, bytes 1 and 3 of `x`, as a T pair (byte 1 in the low
// half), exactly, with integer ops and one multiply instead of the convert
// unit: the byte's sign goes to bit 15 and its 7 exponent/mantissa bits to
// the top of T's exponent/mantissa fields (bf16: bits 4..10, f16: 7..13), which
// reads as the value times 2^-120 (bf16) or 2^-8 (f16), e4m3 subnormals as
// T subnormals; the multiply by 2^120 or 2^8 (subnormals kept: no .ftz) makes
// it exact. A NaN byte (0x7f / 0xff, never written by the cache write unless
// its input was NaN) reads as +-480 here.
template <typename T>
__device__ __forceinline__ uint32_t e4m3x2_hi_to(uint32_t x) {
  constexpr bool kF16 = std::is_same_v<T, f16>;
  constexpr int kShift = kF16 ? 1 : 4;
  constexpr uint32_t kMagnitude = kF16 ? 0x3f803f80u : 0x07f007f0u;
  const uint32_t bits = (x & 0x80008000u) | ((x >> kShift) & kMagnitude);
  uint32_t out;
  if constexpr (kF16) {
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(out) : "r"(bits), "r"(0x5c005c00u));  // 2^8
  } else {
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(out) : "r"(bits), "r"(0x7b807b80u));  // 2^120
  }
  return out;
}

// Bytes 0 and 2 of `x` as a T pair (byte 0 in the low half), like e4m3x2_hi_to.
template <typename T>
__device__ __forceinline__ uint32_t e4m3x2_lo_to(uint32_t x) {
  return e4m3x2_hi_to<T>(x << 8);
}

// Copies 8 bytes to shared memory, or writes 8 zero bytes (e4m3 +0) when
// !valid (src is then not read, but must still be a valid global address).
__device__ __forceinline__ void cp_async_8(uint32_t dst, const void* src, bool valid) {
  const int src_size = valid ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_size)
               : "memory");
}

}  // namespace pagoda::cuda
