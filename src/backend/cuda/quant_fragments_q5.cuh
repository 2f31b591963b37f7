// Tensor-core decode loaders (quant_fragments.cuh's traits and Chunk) for
// GGUF's 5-bit 32-element formats, Q5_0 and Q5_1: a q4_0-style nibble word
// per lane plus the block's 32 high bits (qh), merged into 5-bit integers
// before the A pairs are cut out. XMode::kSplit: lane c's elements of a
// block are 4c + i (k-step 0: low nibbles of qs[4c + i]) and 16 + 4c + i
// (k-step 1: high nibbles), i = 0..3; bit 4 of element j is bit j of qh.
//
// Loads per lane and block: Q5_0 (22-byte blocks, 2-byte aligned) five u16
// (d, qh as two, the quant word as two): 4.4 bytes a load per row, fewer than
// q4_0's 6, so one or two rows of Q5_0 stay on the CUDA-core kernel (see
// quant_mma_gemv_supports). Q5_1 (24-byte blocks: 8-byte aligned when the
// weight is) one u64 header (d, m, qh) and one u32 quant word: 12 bytes a
// load, twice q4_1's, yet one row of it was still measured faster on the
// CUDA-core kernel, so it runs here from two rows.
#pragma once

#include "backend/cuda/quant_fragments.cuh"

namespace pagoda::cuda::qfrag {

// Chunk of a 5-bit block from lane c's quant word w (byte i = qs[4c + i]),
// the block's qh and sub = offset_pair<T>(offset): the A pairs of
// q - offset, dl and ml as given.
//
// The high bits go to bit 4 of each byte without a per-bit loop: for a
// 4-bit value v, v * 0x02040810 puts bit i of v at bit 8i + 4 (the products
// 4 + i + 7j land on distinct bits, so nothing carries, and only j == i
// lands on a bit 8i' + 4); the other bits it sets are either in the low
// nibbles (replaced by the quants in the select) or bits 5..7 of a byte
// (dropped by the 0x1F pair mask).
template <typename T>
__device__ __forceinline__ Chunk q5_chunk(uint32_t w, uint32_t qh, uint32_t sub, float dl,
                                          float ml) {
  constexpr uint32_t kNibbles = 0x0F0F0F0Fu, kFive = 0x001F001Fu, kSpread = 0x02040810u;
  // c = lane % 4 (quant_fragments.cuh's geometry); qh is shifted here, not
  // at load time, so the next step's loads stay in flight until used.
  const uint32_t b = qh >> (4 * (threadIdx.x & 3));
  const uint32_t h0 = (b & 0xFu) * kSpread;          // bit 8i + 4: high bit of 4c + i
  const uint32_t h1 = ((b >> 16) & 0xFu) * kSpread;  // bit 8i + 4: high bit of 16 + 4c + i
  // Byte i, bits 0..4: the 5-bit quant of element 4c + i (z) / 16 + 4c + i (y).
  const uint32_t z = (w & kNibbles) | (h0 & ~kNibbles);
  const uint32_t y = ((w >> 4) & kNibbles) | (h1 & ~kNibbles);
  Chunk k;
  k.lo[0] = int_pair<T>(z & kFive, sub);
  k.hi[0] = int_pair<T>((z >> 8) & kFive, sub);
  k.lo[1] = int_pair<T>(y & kFive, sub);
  k.hi[1] = int_pair<T>((y >> 8) & kFive, sub);
  k.dl[0] = k.dl[1] = dl;
  k.ml[0] = k.ml[1] = ml;
  return k;
}

// q5_0: d f16 | qh u32 | qs[16]; d * (q - 16).
struct FmtQ5_0 {
  static constexpr int kElems = 32, kBytes = 22, kAlign = 2;
  static constexpr XMode kX = XMode::kSplit;
  static constexpr bool kHasMin = false, kStepScales = false;
  static constexpr int kStepBlocks = 8;
  struct Raw {
    uint32_t d[8], qh[8], q[8];
  };
  __device__ static void load(Raw& r, const uint8_t* b, int valid, int c) {
#pragma unroll
    for (int i = 0; i < kStepBlocks; ++i) {
      if (i < valid) {
        r.d[i] = ld_u16(b + i * kBytes);
        r.qh[i] = ld_u32_a2(b + i * kBytes + 2);
        r.q[i] = ld_u32_a2(b + i * kBytes + 6 + 4 * c);
      }
    }
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int h) {
    return q5_chunk<T>(r.q[h], r.qh[h], offset_pair<T>(16), f16_bits(r.d[h]), 0.0f);
  }
};

// q5_1: d f16 | m f16 | qh u32 | qs[16]; d * q + m (ml = -m).
struct FmtQ5_1 {
  static constexpr int kElems = 32, kBytes = 24, kAlign = 8;
  static constexpr XMode kX = XMode::kSplit;
  static constexpr bool kHasMin = true, kStepScales = false;
  static constexpr int kStepBlocks = 8;
  struct Raw {
    uint32_t dm[8], qh[8], q[8];
  };
  __device__ static void load(Raw& r, const uint8_t* b, int valid, int c) {
#pragma unroll
    for (int i = 0; i < kStepBlocks; ++i) {
      if (i < valid) {
        const uint2 hdr = ld_u64(b + i * kBytes);  // (d | m << 16, qh)
        r.dm[i] = hdr.x;
        r.qh[i] = hdr.y;
        r.q[i] = ld_u32(b + i * kBytes + 8 + 4 * c);
      }
    }
  }
  template <typename T>
  __device__ static Chunk chunk(const Raw& r, int h) {
    return q5_chunk<T>(r.q[h], r.qh[h], offset_pair<T>(0), f16_bits(r.dm[h]),
                       -f16_bits(r.dm[h] >> 16));
  }
};

}  // namespace pagoda::cuda::qfrag
