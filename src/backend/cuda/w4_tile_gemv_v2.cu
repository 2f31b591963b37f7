// Decode product, version 2 (T = 1..8 rows of x and K <= kW4TileV2MaxK =
// 4096, or T = 1..4 and K <= kW4TileV2LongMaxK = 16384) with a 4-bit group
// weight in the tile layout (w4_tiles.h): launch_w4_tile_gemv_v2. Version 1
// (w4_tile_gemv.cu) stays for the rest and for A/B timing
// (PAGODA_W4_TILE_KERNEL=v1).
//
// Why: v1's CTA owns one tile, so every CTA loads, waits one DRAM round trip,
// computes and reduces in lockstep with all others (the math never overlaps
// the stream), reloads x per tile and subtracts the zero point per fragment
// register. Here:
//  - Persistent CTAs: grid = min(tiles, SMs x CTAs per SM), balanced so
//    every CTA takes the same number of tiles (+-1) (balanced_grid), each looping
//    t = blockIdx.x, + gridDim.x, ...; the next tile's weight and scale loads
//    are issued before the current tile's math (two register buffers; the
//    tile after that is prefetched into L2), and
//    the warps' partial sums go to one of two shared buffers, so one barrier
//    a tile suffices.
//  - A warp owns a fixed K slice of kChunks = 4 64-column chunks for all
//    tiles (warps a CTA = ceil(K / 256) <= 16): its x fragments
//    (lane (g, c): token g's columns 32 h + 8 c .. + 7 of each half chunk h,
//    as v1) are loaded once and kept in registers, and so are the per-group
//    sums of x, sx[group][token 2c + e], made once by an mma with an all-ones
//    A (C's columns are the tokens of the lane's C fragment).
//  - The zero point is folded: the mma runs on (M + q') straight from one
//    lop3 per fragment register (nibble into the mantissa, M = 128 bf16;
//    f16: the nibble at bits 4..7, (M + 16 q) with M = 1024, the 1/16 folded
//    into the scale), and per group acc += s' (sum - (M + z') sx), where
//    z' = z (bf16) or 16 z (f16) and s' = s (bf16) or s / 16 (f16).
//    Per k16 step: 3 shifts, 4 lop3, 1 mma for 256 elements.
//
// Numerics (the fold's error): (M + q') x is exact in f32 (8 x 11 mantissa
// bits). A group's sum is G / 16 mma steps, each rounding to f32 with an
// error <= 2^-23 of its largest magnitude (|C| and its products, allowing
// for the tensor core's truncation), and |C| <= G (M + q')max |x|max, so
//   |error(sum)| <= (G / 16) 2^-23 G 143 |x|max = 0.035 |x|max  (G = 128, bf16;
//   f16 in units of 1/16: (M + q')max = 79, 0.019 |x|max),
// and (M + z') sx adds 143 times sx's own error ((G / 16) 2^-23 G |x|max)
// plus one f32 rounding: <= 0.018 |x|max (f16: 0.010). In all <= 0.053
// |x|max (bf16) / 0.029 (f16). That is the worst case (every x of one sign
// at |x|max; for random signs |C| and the error grow as sqrt(G)). Against a
// typical group sum sum (q - z) x ~ 4.3 sqrt(G) |x| ~ 50 |x| it is 1.1e-3
// (bf16) / 6e-4 (f16): below one bf16 output rounding (2^-9 = 2e-3), about
// one f16 rounding (2^-11 = 4.9e-4); v1's bound is ~10x smaller (its terms
// are <= 15 |x|). Sums in a fixed order: deterministic.
// Graph-capturable, PDL (pdl_enter).
#include <atomic>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/mma_helpers.cuh"
#include "backend/cuda/quant_mma_step.cuh"
#include "backend/cuda/w4_tiles.h"

namespace pagoda::cuda {
namespace {

// Chunks a warp owns (its K slice: 256 columns), and warps a CTA at most:
// K <= kW4TileV2MaxK = 4096. ptxas (sm_90a, 512 threads so <= 128
// registers): 125 / 120 registers for w4g128 (bf16 / f16), 128 and an
// 8-byte spill for w4g64, 128 and a 100-byte spill for w4g32; 8 chunks a
// warp spilled 400..1600 bytes everywhere, so K > 4096 reads x from shared
// memory (w4_tile_gemv_v2_long_kernel).
constexpr int kChunks = 4;
constexpr int kMaxWarps = 16;
static_assert(kChunks * kMaxWarps * kW4TileChunkElems == kW4TileV2MaxK);

// Per dtype: the magic bits M of (M + q') and where the nibble sits.
template <typename T>
struct Fold;
template <>
struct Fold<__nv_bfloat16> {
  static constexpr uint32_t kMagic2 = 0x43004300u;  // (128, 128)
  static constexpr uint32_t kMask = 0x000F000Fu;    // q at bits 0..3: 128 + q
  static constexpr float kMagic = 128.0f;
  static constexpr float kQScale = 1.0f;  // q' = q
  static constexpr uint32_t kOne2 = 0x3F803F80u;
};
template <>
struct Fold<__half> {
  static constexpr uint32_t kMagic2 = 0x64006400u;  // (1024, 1024)
  static constexpr uint32_t kMask = 0x00F000F0u;    // q at bits 4..7: 1024 + 16 q
  static constexpr float kMagic = 1024.0f;
  static constexpr float kQScale = 16.0f;  // q' = 16 q
  static constexpr uint32_t kOne2 = 0x3C003C00u;
};

__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(mask), "r"(bits));
  return d;
}

// The A fragment (M + q') of one k16 step from its quant word (w4_tiles.h:
// register p holds nibbles (p, p + 4), i.e. bits 4p' of w for its low and
// high element: a0 nibbles at bits 0 / 16, a1 at 4 / 20, a2 at 8 / 24,
// a3 at 12 / 28).
template <typename T>
__device__ __forceinline__ void fold_step(uint32_t (&a)[4], uint32_t w) {
  using F = Fold<T>;
  if constexpr (std::is_same_v<T, __half>) {  // nibble to bits 4..7
    a[0] = lop3_and_or(w << 4, F::kMask, F::kMagic2);
    a[1] = lop3_and_or(w, F::kMask, F::kMagic2);
    a[2] = lop3_and_or(w >> 4, F::kMask, F::kMagic2);
    a[3] = lop3_and_or(w >> 8, F::kMask, F::kMagic2);
  } else {  // nibble to bits 0..3
    a[0] = lop3_and_or(w, F::kMask, F::kMagic2);
    a[1] = lop3_and_or(w >> 4, F::kMask, F::kMagic2);
    a[2] = lop3_and_or(w >> 8, F::kMask, F::kMagic2);
    a[3] = lop3_and_or(w >> 12, F::kMask, F::kMagic2);
  }
}

__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// acc += s' (sum - (M + z') sx) for rows g (acc 0, 1) and g + 8 (acc 2, 3);
// sv: (s f16, z u16) of row g in .x, of row g + 8 in .y.
template <typename T>
__device__ __forceinline__ void fold_group(float (&acc)[4], const float (&sum)[4], uint2 sv,
                                           const float (&sx)[2]) {
  using F = Fold<T>;
  constexpr float kInvQScale = 1.0f / F::kQScale;
  const float sa = __half2float(__ushort_as_half(static_cast<unsigned short>(sv.x & 0xFFFFu))) *
                   kInvQScale;
  const float sb = __half2float(__ushort_as_half(static_cast<unsigned short>(sv.y & 0xFFFFu))) *
                   kInvQScale;
  const float mza = F::kMagic + F::kQScale * static_cast<float>(sv.x >> 16);
  const float mzb = F::kMagic + F::kQScale * static_cast<float>(sv.y >> 16);
  acc[0] = fmaf(sa, fmaf(-mza, sx[0], sum[0]), acc[0]);
  acc[1] = fmaf(sa, fmaf(-mza, sx[1], sum[1]), acc[1]);
  acc[2] = fmaf(sb, fmaf(-mzb, sx[0], sum[2]), acc[2]);
  acc[3] = fmaf(sb, fmaf(-mzb, sx[1], sum[3]), acc[3]);
}

// kG: the group (32, 64, 128). Block: ceil(K / 256) warps. Dynamic shared
// memory: 2 x warps x 4 x 32 floats (the partial buffers).
template <typename T, int kG>
__global__ void __launch_bounds__(kMaxWarps * 32) w4_tile_gemv_v2_kernel(QuantGemvParams p) {
  constexpr int kGroups = kChunks * 64 / kG;  // groups of a full slice
  constexpr int kGroupSteps = kG / 16;        // k16 steps of a group
  static_assert(kChunks * 64 % kG == 0);
  extern __shared__ float partial[];  // [2][num_warps][4][32]
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = blockDim.x >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int num_tiles = static_cast<int>(p.n / kW4TileRows);  // < 2^31 (supports)
  const int64_t num_chunks = p.k / kW4TileChunkElems;
  const int64_t chunk0 = static_cast<int64_t>(warp) * kChunks;
  // Chunks of this warp's slice (>= 1; whole groups, as K % G == 0).
  const int my_chunks = static_cast<int>(num_chunks - chunk0 < kChunks ? num_chunks - chunk0 : kChunks);
  const size_t tile_bytes =
      static_cast<size_t>(kW4TileRows) * static_cast<size_t>(p.k / kG) * (4 + kG / 2);

  // x of token g (a lane of an absent token reads the last token's: its
  // products land in output columns never stored), zero past the slice.
  const int token = g < p.rows ? g : p.rows - 1;
  const T* xrow = static_cast<const T*>(p.x) + token * p.k + chunk0 * 64 + 8 * c;
  uint4 xv[kChunks][2];
#pragma unroll
  for (int d = 0; d < kChunks; ++d) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
      xv[d][h] = d < my_chunks ? __ldg(reinterpret_cast<const uint4*>(xrow + d * 64 + 32 * h))
                               : make_uint4(0, 0, 0, 0);
  }
  // sx[q][e]: the sum of token 2c + e's x over the slice's group q.
  float sx[kGroups][2];
  {
    const uint32_t kOnes[4] = {Fold<T>::kOne2, Fold<T>::kOne2, Fold<T>::kOne2,
                                   Fold<T>::kOne2};
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
      float s4[4] = {};
#pragma unroll
      for (int st = 0; st < kGroupSteps; ++st) {
        const int s = q * kGroupSteps + st, d = s / 4, i = s % 4, h = i >> 1, e = i & 1;
        mma_16816<T>(s4, kOnes, word(xv[d][h], 2 * e), word(xv[d][h], 2 * e + 1));
      }
      sx[q][0] = s4[0];
      sx[q][1] = s4[1];
    }
  }

  // One tile's slice: its quant vectors and its groups' scale pairs.
  struct Slice {
    uint4 q[kChunks];
    uint2 s[kGroups];
  };
  // This lane's quant bytes of tile 0, its scale pairs relative to them, and
  // the bytes between a CTA's consecutive tiles (pointers advance, so the
  // loop does no 64-bit index arithmetic).
  const uint8_t* const lane_w = static_cast<const uint8_t*>(p.w) + (32 * chunk0 + lane) * 16;
  const int64_t scale_offset = num_chunks * kW4TileChunkBytes + (8 * (chunk0 * 64 / kG) + g) * 8 -
                               (32 * chunk0 + lane) * 16;
  const size_t stride_bytes = static_cast<size_t>(gridDim.x) * tile_bytes;
  // Loads the slice whose quant bytes start at w; prefetch: the CTA has a
  // tile after it, whose quant bytes go into L2 (a second tile in flight
  // without registers).
  auto load = [&](Slice& b, const uint8_t* w, bool prefetch) {
    const uint4* quant = reinterpret_cast<const uint4*>(w);
    const uint2* scales = reinterpret_cast<const uint2*>(w + scale_offset);
#pragma unroll
    for (int d = 0; d < kChunks; ++d)
      if (d < my_chunks) b.q[d] = __ldg(quant + 32 * d);
#pragma unroll
    for (int q = 0; q < kGroups; ++q)
      if (q * kG < my_chunks * 64) b.s[q] = __ldg(scales + 8 * q);
    if (prefetch) {
      const uint4* next = reinterpret_cast<const uint4*>(w + stride_bytes);
#pragma unroll
      for (int d = 0; d < kChunks; ++d)
        if (d < my_chunks) prefetch_l2(next + 32 * d);
    }
  };
  // The slice's product, then the warps' sums added in warp order through
  // partial buffer `buf`, bias, store.
  auto compute_store = [&](const Slice& b, int t, int buf) {
    float acc[4] = {};
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
      if (q * kG >= my_chunks * 64) break;
      float sum[4] = {};
#pragma unroll
      for (int st = 0; st < kGroupSteps; ++st) {
        const int s = q * kGroupSteps + st, d = s / 4, i = s % 4, h = i >> 1, e = i & 1;
        uint32_t a[4];
        fold_step<T>(a, word(b.q[d], i));
        mma_16816<T>(sum, a, word(xv[d][h], 2 * e), word(xv[d][h], 2 * e + 1));
      }
      fold_group<T>(acc, sum, b.s[q], sx[q]);
    }
    float* part = partial + static_cast<size_t>(buf) * num_warps * 128;
#pragma unroll
    for (int i = 0; i < 4; ++i) part[(warp * 4 + i) * 32 + lane] = acc[i];
    __syncthreads();
    // Value idx = i * 32 + l: fragment value i of lane l's, over the warps.
    for (int idx = threadIdx.x; idx < 128; idx += blockDim.x) {
      const int i = idx >> 5, l = idx & 31;
      float v = part[i * 32 + l];
#pragma unroll
      for (int w = 1; w < kMaxWarps; ++w)
        if (w < num_warps) v += part[(w * 4 + i) * 32 + l];
      const int64_t row = static_cast<int64_t>(t) * kW4TileRows + (l >> 2) + (i >= 2 ? 8 : 0);
      const int out_token = 2 * (l & 3) + (i & 1);
      if (out_token < p.rows) qmma::store_output<T>(p, row, out_token, v);
    }
  };

  // Two slices alternate: the next tile's loads in flight during this one's
  // math; partial buffer = the tile's round parity.
  const int stride = static_cast<int>(gridDim.x);
  Slice b0, b1;
  int t = static_cast<int>(blockIdx.x);
  const uint8_t* w = lane_w + static_cast<size_t>(t) * tile_bytes;
  if (t < num_tiles) load(b0, w, t + stride < num_tiles);
  for (; t < num_tiles; t += 2 * stride, w += 2 * stride_bytes) {
    if (t + stride < num_tiles) load(b1, w + stride_bytes, t + 2 * stride < num_tiles);
    compute_store(b0, t, 0);
    if (t + stride >= num_tiles) break;
    if (t + 2 * stride < num_tiles) load(b0, w + 2 * stride_bytes, t + 3 * stride < num_tiles);
    compute_store(b1, t + stride, 1);
  }
}

// Long K (kW4TileV2MaxK < K <= kW4TileV2LongMaxK, T <= kW4TileV2LongMaxRows):
// x does not fit registers, so the CTA stages x once in shared memory
// (rows of K + kXPad elements: the pad puts token g's row 64 g bytes
// further in the banks) and each warp reads its fragments from there. Warp
// w owns chunks [w S, w S + S) of every tile (S = ceil(chunks / 16) rounded
// to whole groups; trailing warps may own fewer or none) and walks them in
// units of kChunks chunks; the units of the CTA's tiles form one sequence
// (unit u: tile u >> unit_shift, part u & unit_mask, the same count for
// every warp), loaded one unit ahead (two register slices) with the
// unit after that prefetched into L2. Per group, the sums of x come from an
// all-ones mma beside the product (1 more mma a k16 step). After a tile's
// last unit: partial sums, one barrier, the cross-warp sum as above.
// Numerics as the short kernel (same fold, same bound).
constexpr int kXPad = 32;
static_assert(kW4TileV2LongMaxK / kW4TileChunkElems <= kMaxWarps * 4 * kChunks,
              "at most 4 units a tile");

template <typename T, int kG>
__global__ void __launch_bounds__(kMaxWarps * 32) w4_tile_gemv_v2_long_kernel(QuantGemvParams p) {
  constexpr int kGroups = kChunks * 64 / kG;
  constexpr int kGroupSteps = kG / 16;
  constexpr int kUnitChunks = kG >= 64 ? kG / 64 : 1;  // chunks of a whole group
  extern __shared__ __align__(16) unsigned char smem[];
  float* partial = reinterpret_cast<float*>(smem);  // [2][kMaxWarps][4][32]
  T* xs = reinterpret_cast<T*>(smem + 2 * kMaxWarps * 128 * sizeof(float));  // [rows][K + pad]
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row_elems = p.k + kXPad;
  {  // stage x: 16-byte copies
    const int64_t per_row = p.k / 8, total = p.rows * per_row;
    for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
      const int64_t r = i / per_row, j = i % per_row;
      *reinterpret_cast<uint4*>(xs + r * row_elems + 8 * j) =
          __ldg(reinterpret_cast<const uint4*>(p.x) + i);
    }
  }
  __syncthreads();
  const int num_tiles = static_cast<int>(p.n / kW4TileRows);
  const int num_chunks = static_cast<int>(p.k / kW4TileChunkElems);
  int per_warp = (num_chunks + kMaxWarps - 1) / kMaxWarps;
  per_warp = (per_warp + kUnitChunks - 1) / kUnitChunks * kUnitChunks;
  // Units a tile: ceil(per_warp / kChunks) <= 4, rounded up to a power of
  // two so a unit's tile and part are a shift and a mask (a rounded-up unit
  // has no valid chunks).
  const int unit_shift = per_warp <= kChunks ? 0 : per_warp <= 2 * kChunks ? 1 : 2;
  const int units_per_tile = 1 << unit_shift, unit_mask = units_per_tile - 1;
  const int chunk0 = warp * per_warp;
  const int my_total = max(0, min(per_warp, num_chunks - chunk0));
  const size_t tile_bytes =
      static_cast<size_t>(kW4TileRows) * static_cast<size_t>(p.k / kG) * (4 + kG / 2);
  const int token = g < p.rows ? g : p.rows - 1;
  const T* xlane = xs + token * row_elems + 8 * c;
  const int stride = static_cast<int>(gridDim.x);
  const int my_tiles =
      static_cast<int>(blockIdx.x) < num_tiles
          ? (num_tiles - static_cast<int>(blockIdx.x) + stride - 1) / stride
          : 0;
  const int num_units = my_tiles * units_per_tile;

  struct Slice {
    uint4 q[kChunks];
    uint2 s[kGroups];
  };
  // Unit u's first chunk (in the tile), its valid chunks, and this lane's
  // quant bytes.
  auto unit_chunk = [&](int u) { return chunk0 + (u & unit_mask) * kChunks; };
  auto unit_valid = [&](int u) {
    return max(0, min(kChunks, my_total - (u & unit_mask) * kChunks));
  };
  auto unit_w = [&](int u) {
    const int t = static_cast<int>(blockIdx.x) + (u >> unit_shift) * stride;
    return static_cast<const uint8_t*>(p.w) + static_cast<size_t>(t) * tile_bytes +
           static_cast<size_t>(32 * unit_chunk(u) + lane) * 16;
  };
  auto load = [&](Slice& b, int u) {
    const int valid = unit_valid(u), j0 = unit_chunk(u);
    const uint8_t* w = unit_w(u);
    const uint4* quant = reinterpret_cast<const uint4*>(w);
    const uint2* scales = reinterpret_cast<const uint2*>(
        w - static_cast<size_t>(32 * j0 + lane) * 16 + num_chunks * kW4TileChunkBytes) +
                          8 * (j0 * 64 / kG) + g;
#pragma unroll
    for (int d = 0; d < kChunks; ++d)
      if (d < valid) b.q[d] = __ldg(quant + 32 * d);
#pragma unroll
    for (int q = 0; q < kGroups; ++q)
      if (q * kG < valid * 64) b.s[q] = __ldg(scales + 8 * q);
    if (u + 2 < num_units) {
      const uint4* next = reinterpret_cast<const uint4*>(unit_w(u + 2));
      const int next_valid = unit_valid(u + 2);
#pragma unroll
      for (int d = 0; d < kChunks; ++d)
        if (d < next_valid) prefetch_l2(next + 32 * d);
    }
  };
  float acc[4] = {};
  auto compute = [&](const Slice& b, int u) {
    const int valid = unit_valid(u);
    const T* xu = xlane + unit_chunk(u) * 64;
    const uint32_t kOnes[4] = {Fold<T>::kOne2, Fold<T>::kOne2, Fold<T>::kOne2, Fold<T>::kOne2};
    uint4 xv[2];  // the current chunk's x (a G = 32 group may start mid-chunk)
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
      if (q * kG >= valid * 64) break;
      float sum[4] = {}, s4[4] = {};
#pragma unroll
      for (int st = 0; st < kGroupSteps; ++st) {
        const int s = q * kGroupSteps + st, d = s / 4, i = s % 4, h = i >> 1, e = i & 1;
        if (i == 0) {  // chunk d's x fragments (both halves)
          xv[0] = *reinterpret_cast<const uint4*>(xu + d * 64);
          xv[1] = *reinterpret_cast<const uint4*>(xu + d * 64 + 32);
        }
        uint32_t a[4];
        fold_step<T>(a, word(b.q[d], i));
        mma_16816<T>(sum, a, word(xv[h], 2 * e), word(xv[h], 2 * e + 1));
        mma_16816<T>(s4, kOnes, word(xv[h], 2 * e), word(xv[h], 2 * e + 1));
      }
      const float sx[2] = {s4[0], s4[1]};
      fold_group<T>(acc, sum, b.s[q], sx);
    }
    if ((u & unit_mask) != unit_mask) return;
    // The tile's last unit: the warps' sums through partial buffer (tile
    // round parity), bias, store.
    const int i_tile = u >> unit_shift;
    const int t = static_cast<int>(blockIdx.x) + i_tile * stride;
    float* part = partial + static_cast<size_t>(i_tile & 1) * kMaxWarps * 128;
#pragma unroll
    for (int i = 0; i < 4; ++i) part[(warp * 4 + i) * 32 + lane] = acc[i];
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] = 0.0f;
    __syncthreads();
    if (threadIdx.x >= 128) return;
    const int i = threadIdx.x >> 5;
    float v = part[i * 32 + lane];
#pragma unroll
    for (int w = 1; w < kMaxWarps; ++w) v += part[(w * 4 + i) * 32 + lane];
    const int64_t row = static_cast<int64_t>(t) * kW4TileRows + g + (i >= 2 ? 8 : 0);
    const int out_token = 2 * c + (i & 1);
    if (out_token < p.rows) qmma::store_output<T>(p, row, out_token, v);
  };

  Slice b0, b1;
  if (num_units > 0) load(b0, 0);
  for (int u = 0; u < num_units; u += 2) {
    if (u + 1 < num_units) load(b1, u + 1);
    compute(b0, u);
    if (u + 1 >= num_units) break;
    if (u + 2 < num_units) load(b0, u + 2);
    compute(b1, u + 1);
  }
}

template <typename T, int kG>
struct V2Launch {
  using Kernel = void (*)(QuantGemvParams);
  static constexpr Kernel kernel = w4_tile_gemv_v2_kernel<T, kG>;

  // CTAs of `warps` warps resident on one SM (cached per warp count).
  static int ctas_per_sm(int warps) {
    static std::atomic<int> cache[kMaxWarps + 1];  // 0: not yet asked
    int v = cache[warps].load(std::memory_order_relaxed);
    if (v == 0) {
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, warps * 32,
                                                        smem_bytes(warps)) != cudaSuccess ||
          v < 1)
        v = 1;
      cache[warps].store(v, std::memory_order_relaxed);
    }
    return v;
  }
  static size_t smem_bytes(int warps) { return 2 * static_cast<size_t>(warps) * 128 * sizeof(float); }
};

// Shared memory of the long-K kernel: the partial buffers and x.
size_t long_smem_bytes(int rows, int64_t k) {
  return 2 * kMaxWarps * 128 * sizeof(float) + static_cast<size_t>(rows) * (k + kXPad) * 2;
}

template <typename T, int kG>
struct V2LongLaunch {
  using Kernel = void (*)(QuantGemvParams);
  static constexpr Kernel kernel = w4_tile_gemv_v2_long_kernel<T, kG>;

  // Lets the kernel have the most shared memory it uses, once per device.
  static cudaError_t allow_smem() {
    static std::atomic<uint64_t> done{0};  // bit d: device d done
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) return e;
    const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
    if (bit != 0 && (done.load(std::memory_order_relaxed) & bit) != 0) return cudaSuccess;
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(long_smem_bytes(kW4TileV2LongMaxRows,
                                                              kW4TileV2LongMaxK)));
    if (e == cudaSuccess) done.fetch_or(bit, std::memory_order_relaxed);
    return e;
  }
  // CTAs resident on one SM at `rows` rows and K = k (cached per rows, for
  // the K of the first call: one CTA an SM at every K of the range).
  static int ctas_per_sm(int rows, int64_t k) {
    static std::atomic<int> cache[kW4TileV2LongMaxRows + 1];  // 0: not yet asked
    int v = cache[rows].load(std::memory_order_relaxed);
    if (v == 0) {
      if (allow_smem() != cudaSuccess ||
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, kMaxWarps * 32,
                                                        long_smem_bytes(rows, k)) != cudaSuccess ||
          v < 1)
        v = 1;
      cache[rows].store(v, std::memory_order_relaxed);
    }
    return v;
  }
};

int num_sms() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 1;
  return sms;
}

int v2_warps(int64_t k) {
  const int64_t chunks = k / kW4TileChunkElems;
  return static_cast<int>((chunks + kChunks - 1) / kChunks);
}

// Balanced grid: rounds = ceil(tiles / (SMs x CTAs per SM)), then the fewest
// CTAs that take every tile in that many rounds (tiles a CTA differ by <= 1).
int64_t balanced_grid(int64_t num_tiles, int64_t max_ctas) {
  const int64_t rounds = (num_tiles + max_ctas - 1) / max_ctas;
  return (num_tiles + rounds - 1) / rounds;
}

template <typename T, int kG>
int64_t max_ctas(const QuantGemvParams& p) {
  const int per_sm = p.k > kW4TileV2MaxK
                         ? V2LongLaunch<T, kG>::ctas_per_sm(p.rows, p.k)
                         : V2Launch<T, kG>::ctas_per_sm(v2_warps(p.k));
  return static_cast<int64_t>(num_sms()) * per_sm;
}

template <typename T, int kG>
int64_t grid_of(const QuantGemvParams& p) {
  return balanced_grid(p.n / kW4TileRows, max_ctas<T, kG>(p));
}

template <typename T, int kG>
cudaError_t launch_v2(const QuantGemvParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(grid_of<T, kG>(p)));
  if (p.k > kW4TileV2MaxK) {
    using L = V2LongLaunch<T, kG>;
    const cudaError_t e = L::allow_smem();
    if (e != cudaSuccess) return e;
    return launch_kernel(L::kernel, grid, dim3(kMaxWarps * 32), long_smem_bytes(p.rows, p.k),
                         stream, p);
  }
  using L = V2Launch<T, kG>;
  const int warps = v2_warps(p.k);
  return launch_kernel(L::kernel, grid, dim3(warps * 32), L::smem_bytes(warps), stream, p);
}

// f(T{}, integral_constant kG) for p's dtype (bf16 or f16:
// w4_tile_gemv_supports) and group.
template <typename T, typename F>
auto dispatch_group(const QuantGemvParams& p, F&& f) {
  switch (without_k_perm(p.w_dtype)) {
    case DType::kW4G32:
      return f(T{}, std::integral_constant<int, 32>{});
    case DType::kW4G64:
      return f(T{}, std::integral_constant<int, 64>{});
    default:
      return f(T{}, std::integral_constant<int, 128>{});
  }
}
template <typename F>
auto dispatch_v2(const QuantGemvParams& p, F&& f) {
  return p.dtype == DType::kF16 ? dispatch_group<__half>(p, f)
                                : dispatch_group<__nv_bfloat16>(p, f);
}

}  // namespace

bool w4_tile_gemv_v2_supports(const QuantGemvParams& p) {
  return w4_tile_gemv_supports(p) &&
         ((p.rows <= 8 && p.k <= kW4TileV2MaxK) ||
          (p.rows <= kW4TileV2LongMaxRows && p.k <= kW4TileV2LongMaxK));
}

int64_t w4_tile_gemv_v2_grid(const QuantGemvParams& p) {
  if (!w4_tile_gemv_v2_supports(p)) return 0;
  return dispatch_v2(p, [&](auto t, auto g) -> int64_t {
    return grid_of<decltype(t), decltype(g)::value>(p);
  });
}

int64_t w4_tile_gemv_v2_max_ctas(const QuantGemvParams& p) {
  const bool ok = (p.dtype == DType::kBF16 || p.dtype == DType::kF16) && p.k > 0 &&
                  p.k % kW4TileChunkElems == 0 &&
                  (p.k <= kW4TileV2MaxK ||
                   (p.rows >= 1 && p.rows <= kW4TileV2LongMaxRows && p.k <= kW4TileV2LongMaxK));
  if (!ok) return 0;
  return dispatch_v2(p, [&](auto t, auto g) -> int64_t {
    return max_ctas<decltype(t), decltype(g)::value>(p);
  });
}

cudaError_t launch_w4_tile_gemv_v2(const QuantGemvParams& p, cudaStream_t stream) {
  if (!w4_tile_gemv_v2_supports(p)) return cudaErrorInvalidValue;
  return dispatch_v2(p, [&](auto t, auto g) {
    return launch_v2<decltype(t), decltype(g)::value>(p, stream);
  });
}

}  // namespace pagoda::cuda
