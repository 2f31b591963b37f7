// Device dequantization of the block formats (core/dtype.h), the same
// values as core/block_dequant.cpp (the specification): every product is
// rounded as a separate f32 multiply (__fmul_rn / __fsub_rn / __fadd_rn), so
// no fused multiply-add changes a weight by an ulp.
//
// The unit of work is 32 consecutive elements of a row ("unit"): a whole
// block of the 32-element formats, one of the 8 units of a 256-element
// super-block of the K formats. dequant_unit<F>(block, u, w) writes unit u of
// the block at `block` (a generic pointer: global or shared memory; 2-byte
// aligned; 4-byte aligned for the group formats) into w[0..32). Shared by the decode kernel
// (quant_gemv.cu) and the dequantize-to-half kernel (quant_dequant.cu).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace pagoda::cuda {

// Compile-time geometry of block dtype F.
template <DType F>
struct BlockFormat {
  static constexpr int kElems = static_cast<int>(dtype_block_elems(F));
  static constexpr int kBytes = static_cast<int>(dtype_block_bytes(F));
  static constexpr int kUnits = kElems / 32;  // 32-element units per block
};

namespace quant_detail {

__device__ __forceinline__ float f16_at(const uint8_t* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}

// Little-endian u32 from 4 bytes at any alignment.
__device__ __forceinline__ uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

// Q4_K / Q5_K 6-bit scale and min of sub-block j (0..7).
__device__ __forceinline__ void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 0x3F;
    *m = s[j + 4] & 0x3F;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30);
    *m = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
  }
}

// Q3_K 6-bit scale j (0..15), minus 32.
__device__ __forceinline__ int q3_k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? (scales[j] & 0x0F) : (scales[j - 8] >> 4);
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace quant_detail

template <DType F>
__device__ __forceinline__ void dequant_unit(const uint8_t* b, int u, float (&w)[32]);

// Q4_0: d | qs[16]; element j < 16 low nibble of qs[j], else high nibble of
// qs[j - 16]; d * (q - 8).
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ4_0>(const uint8_t* b, int, float (&w)[32]) {
  const float d = quant_detail::f16_at(b);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int q = b[2 + j];
    w[j] = __fmul_rn(d, static_cast<float>((q & 0x0F) - 8));
    w[j + 16] = __fmul_rn(d, static_cast<float>((q >> 4) - 8));
  }
}

// Q4_1: d | m | qs[16]; d * q + m.
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ4_1>(const uint8_t* b, int, float (&w)[32]) {
  const float d = quant_detail::f16_at(b), m = quant_detail::f16_at(b + 2);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int q = b[4 + j];
    w[j] = __fadd_rn(__fmul_rn(d, static_cast<float>(q & 0x0F)), m);
    w[j + 16] = __fadd_rn(__fmul_rn(d, static_cast<float>(q >> 4)), m);
  }
}

// Q5_0: d | qh u32 | qs[16]; bit 4 of quant j is bit j of qh; d * (q - 16).
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ5_0>(const uint8_t* b, int, float (&w)[32]) {
  const float d = quant_detail::f16_at(b);
  const uint32_t qh = quant_detail::u32_at(b + 2);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int q = b[6 + j];
    const int lo = (q & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (q >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    w[j] = __fmul_rn(d, static_cast<float>(lo - 16));
    w[j + 16] = __fmul_rn(d, static_cast<float>(hi - 16));
  }
}

// Q5_1: d | m | qh u32 | qs[16]; d * q + m.
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ5_1>(const uint8_t* b, int, float (&w)[32]) {
  const float d = quant_detail::f16_at(b), m = quant_detail::f16_at(b + 2);
  const uint32_t qh = quant_detail::u32_at(b + 4);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int q = b[8 + j];
    const int lo = (q & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (q >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    w[j] = __fadd_rn(__fmul_rn(d, static_cast<float>(lo)), m);
    w[j + 16] = __fadd_rn(__fmul_rn(d, static_cast<float>(hi)), m);
  }
}

// Q8_0: d | qs int8[32]; q * d.
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ8_0>(const uint8_t* b, int, float (&w)[32]) {
  const float d = quant_detail::f16_at(b);
#pragma unroll
  for (int j = 0; j < 32; ++j)
    w[j] = __fmul_rn(static_cast<float>(static_cast<int8_t>(b[2 + j])), d);
}

// Q2_K: scales[16] | qs[64] | d | dmin. Element e = u*32 + l: bits
// 2*(u%4).. of qs[(u/4)*32 + l]; sub-block e/16 scale (d * sc&15), min
// (dmin * sc>>4); dl * q - ml.
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ2_K>(const uint8_t* b, int u,
                                                           float (&w)[32]) {
  const float d = quant_detail::f16_at(b + 80), dmin = quant_detail::f16_at(b + 82);
  const uint8_t* qs = b + 16 + (u / 4) * 32;
  const int shift = 2 * (u % 4);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int sc = b[2 * u + half];
    const float dl = __fmul_rn(d, static_cast<float>(sc & 0x0F));
    const float ml = __fmul_rn(dmin, static_cast<float>(sc >> 4));
#pragma unroll
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      const float q = static_cast<float>((qs[l] >> shift) & 3);
      w[l] = __fsub_rn(__fmul_rn(dl, q), ml);
    }
  }
}

// Q3_K: hmask[32] | qs[64] | scales[12] | d. Element e = u*32 + l: low bits
// 2*(u%4).. of qs[(u/4)*32 + l], minus 4 when bit u of hmask[l] is clear;
// (d * scale[e/16]) * q.
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ3_K>(const uint8_t* b, int u,
                                                           float (&w)[32]) {
  const float d = quant_detail::f16_at(b + 108);
  const uint8_t* qs = b + 32 + (u / 4) * 32;
  const int shift = 2 * (u % 4);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float dl =
        __fmul_rn(d, static_cast<float>(quant_detail::q3_k_scale(b + 96, 2 * u + half)));
#pragma unroll
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      const int low = (qs[l] >> shift) & 3;
      const int high_clear = ((b[l] >> u) & 1) ^ 1;
      w[l] = __fmul_rn(dl, static_cast<float>(low - (high_clear << 2)));
    }
  }
}

// Q4_K: d | dmin | scales[12] | qs[128]; unit u is nibble u%2 of
// qs[(u/2)*32 + l]; (d * sc[u]) * q - dmin * m[u]. Q5_K (five_bit) has qh[32]
// before qs: bit u of qh[l] is bit 4 of q.
template <bool kFiveBit>
__device__ __forceinline__ void dequant_q4_q5_k_unit(const uint8_t* b, int u, float (&w)[32]) {
  const float d = quant_detail::f16_at(b), dmin = quant_detail::f16_at(b + 2);
  int sc = 0, m = 0;
  quant_detail::k_scale_min(b + 4, u, &sc, &m);
  const float dl = __fmul_rn(d, static_cast<float>(sc));
  const float ml = __fmul_rn(dmin, static_cast<float>(m));
  const uint8_t* qh = b + 16;
  const uint8_t* qs = (kFiveBit ? b + 48 : b + 16) + (u / 2) * 32;
  const int shift = 4 * (u % 2);
#pragma unroll
  for (int l = 0; l < 32; ++l) {
    int q = (qs[l] >> shift) & 0x0F;
    if (kFiveBit) q |= ((qh[l] >> u) & 1) << 4;
    w[l] = __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
  }
}
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ4_K>(const uint8_t* b, int u,
                                                           float (&w)[32]) {
  dequant_q4_q5_k_unit<false>(b, u, w);
}
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ5_K>(const uint8_t* b, int u,
                                                           float (&w)[32]) {
  dequant_q4_q5_k_unit<true>(b, u, w);
}

// Q6_K: ql[128] | qh[64] | scales int8[16] | d. Element e = u*32 + l, with
// i = u/4, r = (u%4)*32 + l: low nibble r/64 of ql[i*64 + r%64], high bits
// 2*(r/32).. of qh[i*32 + l]; (d * scale[e/16]) * (q - 32).
template <>
__device__ __forceinline__ void dequant_unit<DType::kQ6_K>(const uint8_t* b, int u,
                                                           float (&w)[32]) {
  const float d = quant_detail::f16_at(b + 208);
  const int i = u / 4, s = u % 4;
  const uint8_t* ql = b + i * 64 + (s % 2) * 32;
  const uint8_t* qh = b + 128 + i * 32;
  const int low_shift = 4 * (s / 2), high_shift = 2 * s;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float dl = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(b[192 + 2 * u + half])));
#pragma unroll
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      const int low = (ql[l] >> low_shift) & 0x0F;
      const int high = (qh[l] >> high_shift) & 3;
      w[l] = __fmul_rn(dl, static_cast<float>((low | (high << 4)) - 32));
    }
  }
}

// Group formats (AWQ / GPTQ repacked, core/dtype.h): s f16 | z u16 |
// quants; unit u is elements [32u, 32u + 32) of the group, (q - z) * s.
// 4-bit: byte j holds elements 2j (low nibble) and 2j + 1; 8-bit: byte j.
// Quant bytes start at offset 4, so units are read as aligned u32 words.
// q - z without an integer-to-float conversion: the bits 0x4B000000 | q are
// the float 2^23 + q, and (2^23 + q) - (2^23 + z) is exact.
template <int kBits>
__device__ __forceinline__ void dequant_group_unit(const uint8_t* b, int u, float (&w)[32]) {
  const float s = quant_detail::f16_at(b);
  const float zf = 8388608.0f + static_cast<float>(b[2] | (b[3] << 8));
  const uint32_t* q = reinterpret_cast<const uint32_t*>(b + 4) + u * kBits;  // 32 * kBits / 32
#pragma unroll
  for (int i = 0; i < kBits; ++i) {
    const uint32_t word = q[i];
#pragma unroll
    for (int j = 0; j < 32 / kBits; ++j) {
      const uint32_t v = ((word >> (kBits * j)) & ((1u << kBits) - 1)) | 0x4B000000u;
      w[i * (32 / kBits) + j] = __fmul_rn(__fsub_rn(__uint_as_float(v), zf), s);
    }
  }
}
template <>
__device__ __forceinline__ void dequant_unit<DType::kW4G32>(const uint8_t* b, int u,
                                                            float (&w)[32]) {
  dequant_group_unit<4>(b, u, w);
}
template <>
__device__ __forceinline__ void dequant_unit<DType::kW4G64>(const uint8_t* b, int u,
                                                            float (&w)[32]) {
  dequant_group_unit<4>(b, u, w);
}
template <>
__device__ __forceinline__ void dequant_unit<DType::kW4G128>(const uint8_t* b, int u,
                                                             float (&w)[32]) {
  dequant_group_unit<4>(b, u, w);
}
template <>
__device__ __forceinline__ void dequant_unit<DType::kW8G32>(const uint8_t* b, int u,
                                                            float (&w)[32]) {
  dequant_group_unit<8>(b, u, w);
}
template <>
__device__ __forceinline__ void dequant_unit<DType::kW8G64>(const uint8_t* b, int u,
                                                            float (&w)[32]) {
  dequant_group_unit<8>(b, u, w);
}
template <>
__device__ __forceinline__ void dequant_unit<DType::kW8G128>(const uint8_t* b, int u,
                                                             float (&w)[32]) {
  dequant_group_unit<8>(b, u, w);
}

// Calls f(std::integral_constant<DType, F>{}) for block dtype `t` (a _perm
// group format as its format without the permutation: callers pass the
// permutation separately); returns cudaErrorInvalidValue for other dtypes.
template <typename Fn>
cudaError_t dispatch_block_dtype(DType t, Fn&& f) {
  switch (t) {
    case DType::kQ4_0:
      return f(std::integral_constant<DType, DType::kQ4_0>{});
    case DType::kQ4_1:
      return f(std::integral_constant<DType, DType::kQ4_1>{});
    case DType::kQ5_0:
      return f(std::integral_constant<DType, DType::kQ5_0>{});
    case DType::kQ5_1:
      return f(std::integral_constant<DType, DType::kQ5_1>{});
    case DType::kQ8_0:
      return f(std::integral_constant<DType, DType::kQ8_0>{});
    case DType::kQ2_K:
      return f(std::integral_constant<DType, DType::kQ2_K>{});
    case DType::kQ3_K:
      return f(std::integral_constant<DType, DType::kQ3_K>{});
    case DType::kQ4_K:
      return f(std::integral_constant<DType, DType::kQ4_K>{});
    case DType::kQ5_K:
      return f(std::integral_constant<DType, DType::kQ5_K>{});
    case DType::kQ6_K:
      return f(std::integral_constant<DType, DType::kQ6_K>{});
    case DType::kW4G32:
    case DType::kW4G32Perm:
      return f(std::integral_constant<DType, DType::kW4G32>{});
    case DType::kW4G64:
    case DType::kW4G64Perm:
      return f(std::integral_constant<DType, DType::kW4G64>{});
    case DType::kW4G128:
    case DType::kW4G128Perm:
      return f(std::integral_constant<DType, DType::kW4G128>{});
    case DType::kW8G32:
    case DType::kW8G32Perm:
      return f(std::integral_constant<DType, DType::kW8G32>{});
    case DType::kW8G64:
    case DType::kW8G64Perm:
      return f(std::integral_constant<DType, DType::kW8G64>{});
    case DType::kW8G128:
    case DType::kW8G128Perm:
      return f(std::integral_constant<DType, DType::kW8G128>{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace pagoda::cuda
