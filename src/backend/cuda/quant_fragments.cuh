// Per-format loaders for the tensor-core decode kernel (quant_mma_gemv.cu):
// each turns a lane's share of a weight row's quantization blocks into
// mma.m16n8k16 A-fragment halves holding the *integer* quants (exact in
// bf16 and f16: |q| <= 256), plus the f32 scale and min of each 16-element
// k-step, so that row . x = sum over k-steps of dl * (q . x) - ml * sum(x).
//
// Geometry (shared by every format). The row is cut into 32-element chunks
// (a block of the 32-element formats, a unit of a K super-block, a quarter
// of a 128-group); chunk h of a step of 256 elements is two k-steps s = 0, 1.
// The lane with c = lane % 4 owns 8 elements of every chunk and gives, per
// k-step, the A pairs (k-slots 2c, 2c + 1) and (2c + 8, 2c + 9) of its row:
//  - XMode::kSplit: elements 16 s + 4 c + {0, 2} and {1, 3} (pairs (0, 2),
//    (1, 3)): one k-step = 16 consecutive elements, so a 16-element
//    sub-block (q6_K) has one scale per k-step; byte i of a u32 of quants
//    is element i, and w & 0x000F000F is the pair (0, 2) directly.
//  - XMode::kRun8: elements 8 c + 4 s + {0, 2} and {1, 3}: as kSplit
//    within a k-step, but a lane's 8 elements are consecutive, so with one
//    quant per byte position (q4_K / q5_K) its bytes are one 8-byte load
//    and the quad's load is one whole 32-byte sector of the row (32-element
//    sub-blocks only: a k-step spans the chunk).
//  - XMode::kContig: elements 8 c + 2 s + {0, 4} and {1, 5}: the 8
//    consecutive nibbles of one u32 of the group formats, nibble pairs
//    (n, n + 4) being w >> 4n & 0x000F000F.
// The x side (quant_mma_gemv.cu) loads the same elements of its token and
// pairs them the same way, so the k-permutation cancels in the dot product.
//
// Integers to 16-bit floats without conversions: (magic | q) is the float
// magic + q (bf16 128 + q for q < 128, f16 1024 + q for q < 1024), and one
// packed subtraction of magic + offset leaves q - offset exactly. 8-bit
// quants in bf16 (whose 7-bit mantissa cannot hold them behind the magic)
// go through f32 (2^23 | q) - (2^23 + offset), exact, and keep the top
// halves of the two f32 (exact: the value fits bf16).
//
// Loads, through the read-only path: q4_K / q5_K read a 16-byte header and
// 8-byte quant words (the quad of lanes of a row: one whole 32-byte
// sector); the others u32 words (u16 pairs for the 2-byte aligned q4_0 /
// q8_0 / q6_K blocks), the quad reading 16 contiguous bytes per load (8
// with u16), so two or more loads touch each sector: the loads allocate in
// L1 (not L1::no_allocate) so a sector comes from L2 once, not once per
// load. The block headers (one address for the quad) are broadcast.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace pagoda::cuda::qfrag {

enum class XMode { kSplit, kRun8, kContig };

// ---- loads: read-only path, allocated in L1 (see above) ----
__device__ __forceinline__ uint32_t ld_u32(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned int*>(p));
}
__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}
__device__ __forceinline__ uint2 ld_u64(const uint8_t* p) {  // 8-byte aligned
  return __ldg(reinterpret_cast<const uint2*>(p));
}
__device__ __forceinline__ uint4 ld_u128(const uint8_t* p) {  // 16-byte aligned
  return __ldg(reinterpret_cast<const uint4*>(p));
}
// 4 bytes at a 2-byte aligned address, little-endian.
__device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) {
  return ld_u16(p) | (ld_u16(p + 2) << 16);
}

// Load policies of the format loaders (F::load<L>): GlobalLoads reads the
// weight in global memory through the read-only path above; SharedLoads a
// shared-memory copy of it at the same offsets mod 16 (quant_tiled_gemm.cu),
// so every load keeps the format's alignment.
struct GlobalLoads {
  __device__ static uint32_t u16(const uint8_t* p) { return ld_u16(p); }
  __device__ static uint32_t u32(const uint8_t* p) { return ld_u32(p); }
  __device__ static uint32_t u32_a2(const uint8_t* p) { return ld_u32_a2(p); }
  __device__ static uint2 u64(const uint8_t* p) { return ld_u64(p); }
  __device__ static uint4 u128(const uint8_t* p) { return ld_u128(p); }
};
struct SharedLoads {
  __device__ static uint32_t u16(const uint8_t* p) {
    return *reinterpret_cast<const uint16_t*>(p);
  }
  __device__ static uint32_t u32(const uint8_t* p) {
    return *reinterpret_cast<const uint32_t*>(p);
  }
  __device__ static uint32_t u32_a2(const uint8_t* p) { return u16(p) | (u16(p + 2) << 16); }
  __device__ static uint2 u64(const uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }
  __device__ static uint4 u128(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }
};

// ---- integer -> 16-bit float pairs (T: bf16 or f16, the x dtype) ----
template <typename T>
struct Half2;
template <>
struct Half2<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static constexpr uint32_t kMagic = 0x43004300u;  // (128, 128)
  static constexpr uint32_t kOne = 0x3F803F80u;    // (1, 1)
};
template <>
struct Half2<__half> {
  using type = __half2;
  static constexpr uint32_t kMagic = 0x64006400u;  // (1024, 1024)
  static constexpr uint32_t kOne = 0x3C003C00u;    // (1, 1)
};

template <typename T>
__device__ __forceinline__ uint32_t sub2(uint32_t a, uint32_t b) {
  using V = typename Half2<T>::type;
  const V r = __hsub2(*reinterpret_cast<const V*>(&a), *reinterpret_cast<const V*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// The pair (magic + off, magic + off): subtracting it from (magic | q)
// leaves q - off. off < 128 (bf16) / 1024 (f16).
template <typename T>
__device__ __forceinline__ uint32_t offset_pair(uint32_t off) {
  return Half2<T>::kMagic + off * 0x00010001u;
}

// The ints in bits 0..6 and 16..22 of v (all other bits zero) minus the
// offset of `sub` (offset_pair), as a pair of T.
template <typename T>
__device__ __forceinline__ uint32_t int_pair(uint32_t v, uint32_t sub) {
  return sub2<T>(v | Half2<T>::kMagic, sub);
}

// Bytes i and j (0..3) of w as unsigned ints minus off (0..256), a pair of T.
template <typename T>
__device__ __forceinline__ uint32_t byte_pair(uint32_t w, int i, int j, uint32_t off) {
  if constexpr (std::is_same<T, __half>::value) {
    const uint32_t h = __byte_perm(w, 0x64u, 0x4040u | i | (j << 8));  // (1024 + w_i, 1024 + w_j)
    return sub2<T>(h, offset_pair<T>(off));
  } else {
    const float o = 8388608.0f + static_cast<float>(off);
    const float a = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | i)) - o;
    const float b = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | j)) - o;
    return __byte_perm(__float_as_uint(a), __float_as_uint(b), 0x7632u);
  }
}

__device__ __forceinline__ float f16_bits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
}
// Byte i (0..3) of w as a float: one byte permute into 2^23 | b.
__device__ __forceinline__ float byte_float(uint32_t w, int i) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | i)) - 8388608.0f;
}

// What a format gives for one 32-element chunk of one row (lane c's
// elements, see above): the A pairs of k-step s, lo = k-slots (2c, 2c + 1),
// hi = (2c + 8, 2c + 9); the scale dl[s] and, for kHasMin formats, the min
// ml[s] of k-step s (row . x = sum dl * (q . x) - ml * sum(x)). Formats with
// kStepScales == false have dl[0] == dl[1], ml[0] == ml[1].
struct Chunk {
  uint32_t lo[2], hi[2];
  float dl[2], ml[2];
};

constexpr uint32_t kLowNibbles = 0x000F000Fu;  // nibbles 0 and 4 of a u32

// Format traits: kElems / kBytes per block, kAlign (the bytes of every
// load: 2 or 4), kX, kHasMin, kStepScales, and
//  - Raw: one row's share of a step (256 elements: kStepBlocks blocks) for
//    lane c; load<L>(r, blocks, valid, c) reads the step's first `valid`
//    blocks starting at `blocks` through load policy L (GlobalLoads by
//    default, SharedLoads from a shared-memory copy);
//  - chunk<T>(r, h): chunk h (0..7) of the step.
// Each format's element layout is core/dtype.h / quant_blocks.cuh's.

// q4_0: d f16 | qs[16]; element j < 16 low nibble of qs[j], j >= 16 high
// nibble of qs[j - 16]; d * (q - 8). Lane c: qs[4c..4c+3] = elements
// 4c + i (low) and 16 + 4c + i (high).
struct FmtQ4_0 {
  static constexpr int kElems = 32, kBytes = 18, kAlign = 2;
  static constexpr XMode kX = XMode::kSplit;
  static constexpr bool kHasMin = false, kStepScales = false;
  static constexpr int kStepBlocks = 8;
  struct Raw {
    uint32_t d[8], q[8];
  };
  template <class L = GlobalLoads>
  __device__ static void load(Raw& r, const uint8_t* b, int valid, int c) {
#pragma unroll
    for (int i = 0; i < kStepBlocks; ++i) {
      if (i < valid) {
        r.d[i] = L::u16(b + i * kBytes);
        r.q[i] = L::u32_a2(b + i * kBytes + 2 + 4 * c);
      }
    }
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int h) {
    const uint32_t w = r.q[h], sub = offset_pair<T>(8);
    Chunk k;
    k.lo[0] = int_pair<T>(w & kLowNibbles, sub);
    k.hi[0] = int_pair<T>((w >> 8) & kLowNibbles, sub);
    k.lo[1] = int_pair<T>((w >> 4) & kLowNibbles, sub);
    k.hi[1] = int_pair<T>((w >> 12) & kLowNibbles, sub);
    k.dl[0] = k.dl[1] = f16_bits(r.d[h]);
    k.ml[0] = k.ml[1] = 0.0f;
    return k;
  }
};

// q4_1: d f16 | m f16 | qs[16] (q4_0's nibbles); d * q + m.
struct FmtQ4_1 {
  static constexpr int kElems = 32, kBytes = 20, kAlign = 4;
  static constexpr XMode kX = XMode::kSplit;
  static constexpr bool kHasMin = true, kStepScales = false;
  static constexpr int kStepBlocks = 8;
  struct Raw {
    uint32_t dm[8], q[8];
  };
  template <class L = GlobalLoads>
  __device__ static void load(Raw& r, const uint8_t* b, int valid, int c) {
#pragma unroll
    for (int i = 0; i < kStepBlocks; ++i) {
      if (i < valid) {
        r.dm[i] = L::u32(b + i * kBytes);
        r.q[i] = L::u32(b + i * kBytes + 4 + 4 * c);
      }
    }
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int h) {
    const uint32_t w = r.q[h], sub = offset_pair<T>(0);
    Chunk k;
    k.lo[0] = int_pair<T>(w & kLowNibbles, sub);
    k.hi[0] = int_pair<T>((w >> 8) & kLowNibbles, sub);
    k.lo[1] = int_pair<T>((w >> 4) & kLowNibbles, sub);
    k.hi[1] = int_pair<T>((w >> 12) & kLowNibbles, sub);
    k.dl[0] = k.dl[1] = f16_bits(r.dm[h]);
    k.ml[0] = k.ml[1] = -f16_bits(r.dm[h] >> 16);
    return k;
  }
};

// q8_0: d f16 | qs int8[32]; q * d. Lane c: qs[4c..4c+3] (k-step 0) and
// qs[16+4c..] (k-step 1); signed bytes as (b ^ 0x80) - 128.
struct FmtQ8_0 {
  static constexpr int kElems = 32, kBytes = 34, kAlign = 2;
  static constexpr XMode kX = XMode::kSplit;
  static constexpr bool kHasMin = false, kStepScales = false;
  static constexpr int kStepBlocks = 8;
  struct Raw {
    uint32_t d[8], q[8][2];
  };
  template <class L = GlobalLoads>
  __device__ static void load(Raw& r, const uint8_t* b, int valid, int c) {
#pragma unroll
    for (int i = 0; i < kStepBlocks; ++i) {
      if (i < valid) {
        r.d[i] = L::u16(b + i * kBytes);
        r.q[i][0] = L::u32_a2(b + i * kBytes + 2 + 4 * c);
        r.q[i][1] = L::u32_a2(b + i * kBytes + 18 + 4 * c);
      }
    }
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int h) {
    Chunk k;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint32_t u = r.q[h][s] ^ 0x80808080u;
      k.lo[s] = byte_pair<T>(u, 0, 2, 128);
      k.hi[s] = byte_pair<T>(u, 1, 3, 128);
    }
    k.dl[0] = k.dl[1] = f16_bits(r.d[h]);
    k.ml[0] = k.ml[1] = 0.0f;
    return k;
  }
};

// q4_K / q5_K (kFive): d | dmin | scales[12] | (q5_K: qh[32] |) qs[128].
// Unit u (a chunk) is nibble u % 2 of qs[(u / 2) * 32 + l] (q5_K: bit 4 is
// bit u of qh[l]); (d * sc[u]) * q - dmin * m[u]. Lane c: the 8 bytes
// qs[32j + 8c ..] (and qh[8c ..]) = elements 8c + i of units 2j, 2j + 1
// (XMode::kRun8; blocks of 144 / 176 bytes keep a 16-byte aligned weight's
// header and quants 16- and 8-byte aligned).
template <bool kFive>
struct FmtQ45K {
  static constexpr int kElems = 256, kBytes = kFive ? 176 : 144, kAlign = 16;
  static constexpr XMode kX = XMode::kRun8;
  static constexpr bool kHasMin = true, kStepScales = false;
  static constexpr int kStepBlocks = 1;
  static constexpr int kQs = kFive ? 48 : 16;
  struct Raw {
    uint32_t hdr[4], q[4][2], qh[2];
  };
  template <class L = GlobalLoads>
  __device__ static void load(Raw& r, const uint8_t* b, int, int c) {
    const uint4 h = L::u128(b);
    r.hdr[0] = h.x;
    r.hdr[1] = h.y;
    r.hdr[2] = h.z;
    r.hdr[3] = h.w;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint2 q = L::u64(b + kQs + 32 * j + 8 * c);  // k-step 0: q.x, 1: q.y
      r.q[j][0] = q.x;
      r.q[j][1] = q.y;
    }
    if constexpr (kFive) {
      const uint2 q = L::u64(b + 16 + 8 * c);
      r.qh[0] = q.x;
      r.qh[1] = q.y;
    }
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int u) {
    const uint32_t sub = offset_pair<T>(0);
    const int shift = 4 * (u % 2);
    Chunk k;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint32_t w = r.q[u / 2][s] >> shift;
      uint32_t lo = w & kLowNibbles, hi = (w >> 8) & kLowNibbles;
      if constexpr (kFive) {
        const uint32_t hb = r.qh[s] >> u;  // bit 0 of byte i: bit 4 of element i
        lo |= (hb << 4) & 0x00100010u;
        hi |= (hb >> 4) & 0x00100010u;
      }
      k.lo[s] = int_pair<T>(lo, sub);
      k.hi[s] = int_pair<T>(hi, sub);
    }
    // The 6-bit scales and mins of units 0..3 (sc, m) and 4..7, one byte
    // each, four to a word (quant_blocks.cuh k_scale_min, bytewise); the
    // compiler keeps the four words across the unrolled units.
    const uint32_t s0 = r.hdr[1], s1 = r.hdr[2], s2 = r.hdr[3];
    const uint32_t sc4 = u < 4 ? s0 & 0x3F3F3F3Fu : (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
    const uint32_t m4 =
        u < 4 ? s1 & 0x3F3F3F3Fu : ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u);
    k.dl[0] = k.dl[1] = __fmul_rn(f16_bits(r.hdr[0]), byte_float(sc4, u % 4));
    k.ml[0] = k.ml[1] = __fmul_rn(f16_bits(r.hdr[0] >> 16), byte_float(m4, u % 4));
    return k;
  }
};

// q6_K: ql[128] | qh[64] | scales int8[16] | d. Unit u = 4i + s: element l
// is nibble s / 2 of ql[64i + 32(s % 2) + l] with bits 2s.. of qh[32i + l]
// as bits 4, 5; (d * scale[2u + l / 16]) * (q - 32). Lane c: ql[64i +
// 16m + 4c ..] (m = 2(s % 2) + k-step), qh[32i + 16 k-step + 4c ..]; the
// 16-element sub-blocks are the k-steps.
struct FmtQ6K {
  static constexpr int kElems = 256, kBytes = 210, kAlign = 2;
  static constexpr XMode kX = XMode::kSplit;
  static constexpr bool kHasMin = false, kStepScales = true;
  static constexpr int kStepBlocks = 1;
  struct Raw {
    uint32_t ql[2][4], qh[2][2], sc[4], d;
  };
  template <class L = GlobalLoads>
  __device__ static void load(Raw& r, const uint8_t* b, int, int c) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int m = 0; m < 4; ++m) r.ql[i][m] = L::u32_a2(b + 64 * i + 16 * m + 4 * c);
#pragma unroll
      for (int s = 0; s < 2; ++s) r.qh[i][s] = L::u32_a2(b + 128 + 32 * i + 16 * s + 4 * c);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) r.sc[i] = L::u32_a2(b + 192 + 4 * i);
    r.d = L::u16(b + 208);
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int u) {
    const int i = u / 4, s = u % 4;
    const uint32_t sub = offset_pair<T>(32);
    const float d = f16_bits(r.d);
    Chunk k;
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const uint32_t ql = r.ql[i][2 * (s % 2) + t] >> (4 * (s / 2));
      const uint32_t qh = r.qh[i][t] >> (2 * s);  // bits 0, 1 of byte i: bits 4, 5 of element i
      k.lo[t] = int_pair<T>((ql & kLowNibbles) | ((qh << 4) & 0x00300030u), sub);
      k.hi[t] = int_pair<T>(((ql >> 8) & kLowNibbles) | ((qh >> 4) & 0x00300030u), sub);
      const int j = 2 * u + t;  // int8 scale j, as (b ^ 0x80) - 128
      const float scale = byte_float(r.sc[j / 4] ^ 0x80808080u, j % 4) - 128.0f;
      k.dl[t] = __fmul_rn(d, scale);
      k.ml[t] = 0.0f;
    }
    return k;
  }
};

// Group formats (AWQ / GPTQ repacked, core/dtype.h): s f16 | z u16 | quants;
// (q - z) * s. 4-bit: byte j holds elements 2j (low nibble), 2j + 1; lane c
// of chunk h reads the u32 of its elements 8c .. 8c + 7 (XMode::kContig).
// 8-bit: byte j is element j; lane c reads bytes 4c.. and 16 + 4c.. of the
// chunk (XMode::kSplit).
template <int kBits, int kGroup>
struct FmtGroup {
  static constexpr int kElems = kGroup, kBytes = 4 + kGroup * kBits / 8, kAlign = 4;
  static constexpr XMode kX = kBits == 4 ? XMode::kContig : XMode::kSplit;
  static constexpr bool kHasMin = false, kStepScales = false;
  static constexpr int kStepBlocks = 256 / kGroup;
  static constexpr int kChunks = kGroup / 32;  // per block
  struct Raw {
    uint32_t hdr[kStepBlocks], q[8][kBits / 4];
  };
  template <class L = GlobalLoads>
  __device__ static void load(Raw& r, const uint8_t* b, int valid, int c) {
#pragma unroll
    for (int i = 0; i < kStepBlocks; ++i) {
      if (i < valid) {
        const uint8_t* p = b + i * kBytes;
        r.hdr[i] = L::u32(p);
#pragma unroll
        for (int h = 0; h < kChunks; ++h) {
          if constexpr (kBits == 4) {
            r.q[i * kChunks + h][0] = L::u32(p + 4 + 16 * h + 4 * c);
          } else {
            r.q[i * kChunks + h][0] = L::u32(p + 4 + 32 * h + 4 * c);
            r.q[i * kChunks + h][1] = L::u32(p + 4 + 32 * h + 16 + 4 * c);
          }
        }
      }
    }
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int h) {
    const uint32_t hdr = r.hdr[h / kChunks], z = hdr >> 16;
    Chunk k;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      if constexpr (kBits == 4) {  // k-step s: nibble pairs (2s, 2s + 4), (2s + 1, 2s + 5)
        const uint32_t w = r.q[h][0], sub = offset_pair<T>(z);
        k.lo[s] = int_pair<T>((w >> (8 * s)) & kLowNibbles, sub);
        k.hi[s] = int_pair<T>((w >> (8 * s + 4)) & kLowNibbles, sub);
      } else {
        k.lo[s] = byte_pair<T>(r.q[h][s], 0, 2, z);
        k.hi[s] = byte_pair<T>(r.q[h][s], 1, 3, z);
      }
    }
    k.dl[0] = k.dl[1] = f16_bits(hdr);
    k.ml[0] = k.ml[1] = 0.0f;
    return k;
  }
};

}  // namespace pagoda::cuda::qfrag
