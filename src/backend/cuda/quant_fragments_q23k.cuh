// Tensor-core decode loaders (quant_fragments.cuh's traits and Chunk) for
// GGUF's 2- and 3-bit K formats, Q2_K and Q3_K (Q2_K / Q3_K_* files mix
// them with Q4_K..Q6_K). Both have 16-element sub-blocks with their own
// scale, so they use XMode::kSplit with kStepScales as q6_K does: k-step t
// of unit u (chunk u, elements 32u + 16t + 4c + i for lane c, i = 0..3)
// is one sub-block, j = 2u + t, and its f32 dl / ml are those of
// core/block_dequant.cpp: Q2_K d * (sc & 15), dmin * (sc >> 4); Q3_K
// d * (6-bit scale - 32). Element 32u + l's low bits are bits 2(u % 4)..
// of qs[32(u / 4) + l]: lane c reads qs[32(u / 4) + 16t + 4c ..] as one
// u32 whose byte i is element i of its four, for all four u of a u / 4.
//
// Loads per lane and block: Q2_K (84-byte blocks, 4-byte aligned) nine u32
// (scales as 4, quants as 4, d | dmin); Q3_K (110-byte blocks, 2-byte
// aligned) nineteen u16 (quants 8, hmask 4, scales 6, d): 9.3 and 5.8 bytes
// a load per row, about q6_K's 6.4. Both run here from one row: the
// CUDA-core kernel spends ~4 f32 ops per element on them.
#pragma once

#include "backend/cuda/quant_fragments.cuh"

namespace pagoda::cuda::qfrag {

constexpr uint32_t kPairBits2 = 0x00030003u;  // bits 0, 1 of bytes 0 and 2
constexpr uint32_t kPairBits3 = 0x00070007u;  // bits 0..2 of bytes 0 and 2

// q2_K: scales[16] | qs[64] | d f16 | dmin f16; (d * (sc & 15)) * q -
// dmin * (sc >> 4), sc = scales[j] of sub-block j.
struct FmtQ2K {
  static constexpr int kElems = 256, kBytes = 84, kAlign = 4;
  static constexpr XMode kX = XMode::kSplit;
  static constexpr bool kHasMin = true, kStepScales = true;
  static constexpr int kStepBlocks = 1;
  struct Raw {
    uint32_t sc[4], q[2][2], dm;  // q[u / 4][t]
  };
  __device__ static void load(Raw& r, const uint8_t* b, int, int c) {
#pragma unroll
    for (int i = 0; i < 4; ++i) r.sc[i] = ld_u32(b + 4 * i);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int t = 0; t < 2; ++t) r.q[j][t] = ld_u32(b + 16 + 32 * j + 16 * t + 4 * c);
    }
    r.dm = ld_u32(b + 80);
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int u) {
    const uint32_t sub = offset_pair<T>(0);
    const float d = f16_bits(r.dm), dmin = f16_bits(r.dm >> 16);
    Chunk k;
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const uint32_t w = r.q[u / 4][t] >> (2 * (u % 4));
      k.lo[t] = int_pair<T>(w & kPairBits2, sub);
      k.hi[t] = int_pair<T>((w >> 8) & kPairBits2, sub);
      // Sub-block j's scale byte, its nibbles as floats (the compiler keeps
      // the masked words across the unrolled units).
      const int j = 2 * u + t;
      const uint32_t s = r.sc[j / 4];
      k.dl[t] = __fmul_rn(d, byte_float(s & 0x0F0F0F0Fu, j % 4));
      k.ml[t] = __fmul_rn(dmin, byte_float((s >> 4) & 0x0F0F0F0Fu, j % 4));
    }
    return k;
  }
};

// q3_K: hmask[32] | qs[64] | scales[12] | d f16; (d * scale[j]) * q, q =
// (low 2 bits | bit u of hmask[l] << 2) - 4 for element 32u + l. Lane c's
// hmask word of k-step t: hmask[16t + 4c ..] (byte i: bit u is unit u's).
struct FmtQ3K {
  static constexpr int kElems = 256, kBytes = 110, kAlign = 2;
  static constexpr XMode kX = XMode::kSplit;
  static constexpr bool kHasMin = false, kStepScales = true;
  static constexpr int kStepBlocks = 1;
  struct Raw {
    uint32_t hm[2], q[2][2], sc[3], d;  // q[u / 4][t]
  };
  __device__ static void load(Raw& r, const uint8_t* b, int, int c) {
#pragma unroll
    for (int t = 0; t < 2; ++t) r.hm[t] = ld_u32_a2(b + 16 * t + 4 * c);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int t = 0; t < 2; ++t) r.q[j][t] = ld_u32_a2(b + 32 + 32 * j + 16 * t + 4 * c);
    }
#pragma unroll
    for (int i = 0; i < 3; ++i) r.sc[i] = ld_u32_a2(b + 96 + 4 * i);
    r.d = ld_u16(b + 108);
  }
  // The 6-bit scales 4g .. 4g + 3, one per byte (core/block_dequant.cpp
  // q3_k_scale, bytewise): low nibbles of scales[0..7] for g < 2, high
  // nibbles of scales[0..7] for g >= 2, bits 2g.. of scales[8..11] on top.
  __device__ static uint32_t scale_bytes(const Raw& r, int g) {
    const uint32_t low = g < 2 ? r.sc[g] & 0x0F0F0F0Fu : (r.sc[g - 2] >> 4) & 0x0F0F0F0Fu;
    const uint32_t high = g < 3 ? r.sc[2] << (4 - 2 * g) : r.sc[2] >> 2;
    return low | (high & 0x30303030u);
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int u) {
    const uint32_t sub = offset_pair<T>(4);
    const float d = f16_bits(r.d);
    Chunk k;
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      // Byte i: bits 0, 1 the low bits, bit 2 bit u of the hmask byte.
      const uint32_t low = r.q[u / 4][t] >> (2 * (u % 4));
      const uint32_t high = u >= 2 ? r.hm[t] >> (u - 2) : r.hm[t] << (2 - u);
      const uint32_t z = (low & 0x03030303u) | (high & 0x04040404u);
      k.lo[t] = int_pair<T>(z & kPairBits3, sub);
      k.hi[t] = int_pair<T>((z >> 8) & kPairBits3, sub);
      const int j = 2 * u + t;  // scale - 32 from 2^23 + scale in one subtraction
      const float scale =
          __uint_as_float(__byte_perm(scale_bytes(r, j / 4), 0x4B000000u, 0x7440u | (j % 4))) -
          8388640.0f;
      k.dl[t] = __fmul_rn(d, scale);
      k.ml[t] = 0.0f;
    }
    return k;
  }
};

}  // namespace pagoda::cuda::qfrag
