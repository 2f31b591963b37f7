// Decode product (T = 1..32 rows of x) with a 4-bit group weight in the
// tile layout (w4_tiles.h): launch_w4_tile_gemv, version 1, and the choice
// between it and version 2 (w4_tile_gemv_v2.cu, T <= 8).
//
// Why: the row-of-blocks kernel (quant_mma_gemv.cu, FmtGroup<4, 128>) spent
// ~0.2 warp-instructions per weight element gathering nibbles out of 68-byte
// blocks and had one step's loads in flight per warp (H200: 1.2-1.9 of
// 4.8 TB/s). Here a lane's 16-byte load per 64-column chunk is its mma A
// fragments for the chunk's four k16 steps; a fragment register is one
// lop3 (two nibbles into the mantissas of the pair M + q, M = 128 bf16 /
// 1024 f16, or for f16 also M + 16 q) and one packed subtract or fma giving
// the exact (q - z): per k16 step 4 lop3, 1 (f16) or 3 (bf16) shifts, 4
// packed ops and 1 mma per n8 tile of x for 16 x 16 elements.
//
// Layout: a CTA of kWarps warps owns one 16-row tile; warp w takes a
// contiguous range of whole units (max(G, 64) columns) of K in batches of
// kDepth chunks, two batches alternating: the next batch's weight and scale
// loads are issued before this batch's math (up to 2 kDepth chunks, 4 KiB a
// warp, in flight). x: lane (g, c) reads token 8 j + g's columns
// 32 h + 8 c .. + 7 of each half chunk h (one 16-byte load, L1 / L2; a lane
// of an absent token reads the last token's, into output columns never
// stored). Per group a fresh f32 mma sum, then acc += s * sum. The warps'
// sums are added in warp order in shared memory (qmma::store_tiles), then
// bias and store.
//
// Numerics: (q - z) and its products with x are exact; sums in f32 in a
// fixed order. Deterministic, graph-capturable, PDL (pdl_enter).
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/quant_mma_step.cuh"
#include "backend/cuda/w4_tiles.h"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kDepth = 4;  // chunks a batch (a multiple of every unit's chunks)

// The magic M of T: (M + q) is the bits M | q (q < 16); f16 also M / 16
// and 1 / 16 for its high-nibble pairs (M + 16 q).
template <typename T>
struct Magic;
template <>
struct Magic<__nv_bfloat16> {
  static constexpr uint32_t kBits = 0x4300;  // 128
};
template <>
struct Magic<__half> {
  static constexpr uint32_t kBits = 0x6400;  // 1024
  static constexpr float kValue = 1024.0f;
  static constexpr uint32_t kSixteenth = 0x2C00;  // 1 / 16
};

__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(mask), "r"(bits));
  return d;
}

template <typename T>
__device__ __forceinline__ uint32_t sub2(uint32_t a, uint32_t b);
template <>
__device__ __forceinline__ uint32_t sub2<__nv_bfloat16>(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("sub.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
template <>
__device__ __forceinline__ uint32_t sub2<__half>(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

template <typename T>
__device__ __forceinline__ uint32_t fma2(uint32_t a, uint32_t b, uint32_t c);
template <>
__device__ __forceinline__ uint32_t fma2<__half>(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// One group's constants for lane (g, c): scales of rows g, g + 8 in f32,
// (M + z_g) pairs for row g's registers (a0, a2), and for row g + 8's (a1,
// a3): f16 -(M / 16 + z_{g+8}) pairs (decoded from M + 16 q), bf16
// (M + z_{g+8}) pairs (from M + q: bf16's 7 mantissa bits cannot hold
// 16 q above M = 128).
struct GroupConsts {
  float sa, sb;
  uint32_t za, zb;
};

template <typename T>
__device__ __forceinline__ GroupConsts group_consts(uint2 sv) {
  GroupConsts k;
  k.sa = __half2float(__ushort_as_half(static_cast<unsigned short>(sv.x & 0xFFFFu)));
  k.sb = __half2float(__ushort_as_half(static_cast<unsigned short>(sv.y & 0xFFFFu)));
  k.za = (Magic<T>::kBits + (sv.x >> 16)) * 0x10001u;
  if constexpr (std::is_same_v<T, __half>) {
    const float zh = -(Magic<T>::kValue / 16.0f + static_cast<float>(sv.y >> 16));
    k.zb = pack2<T>(zh, zh);
  } else {
    k.zb = (Magic<T>::kBits + (sv.y >> 16)) * 0x10001u;
  }
  return k;
}

// The A fragment (a0 .. a3 of mma.m16n8k16) of one k16 step from its quant
// word (w4_tiles.h): register p holds nibbles (p, p + 4), rows g (p even)
// and g + 8 (p odd). Each is one lop3 putting two nibbles into the mantissas
// of the pair (M + q) (nibbles at bits 0..3 of each half) or, f16 only,
// (M + 16 q) (bits 4..7), then one packed subtract of (M + z) or fma with
// 1 / 16 and -(M / 16 + z): exact (q - z).
template <typename T>
__device__ __forceinline__ void decode_step(uint32_t (&a)[4], uint32_t w, const GroupConsts& k) {
  constexpr uint32_t kMagic2 = Magic<T>::kBits * 0x10001u;
  const uint32_t w8 = w >> 8;
  a[0] = sub2<T>(lop3_and_or(w, 0x000F000Fu, kMagic2), k.za);
  a[2] = sub2<T>(lop3_and_or(w8, 0x000F000Fu, kMagic2), k.za);
  if constexpr (std::is_same_v<T, __half>) {
    constexpr uint32_t kSixteenth2 = Magic<T>::kSixteenth * 0x10001u;
    a[1] = fma2<T>(lop3_and_or(w, 0x00F000F0u, kMagic2), kSixteenth2, k.zb);
    a[3] = fma2<T>(lop3_and_or(w8, 0x00F000F0u, kMagic2), kSixteenth2, k.zb);
  } else {
    a[1] = sub2<T>(lop3_and_or(w >> 4, 0x000F000Fu, kMagic2), k.zb);
    a[3] = sub2<T>(lop3_and_or(w >> 12, 0x000F000Fu, kMagic2), k.zb);
  }
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// kG: the group (32, 64, 128); kNTiles: n8 tiles of x (tokens 8 j + g).
template <typename T, int kG, int kNTiles>
__global__ void __launch_bounds__(kWarps * 32) w4_tile_gemv_kernel(QuantGemvParams p) {
  constexpr int kUnitChunks = kG >= 64 ? kG / 64 : 1;  // chunks of one unit
  constexpr int kUnitGroups = kUnitChunks * 64 / kG;   // groups of one unit (G = 32: 2)
  constexpr int kGroupSteps = kG / 16;                 // k16 steps of a group
  constexpr int kBatchGroups = kDepth * 64 / kG;
  static_assert(kDepth % kUnitChunks == 0);
  __shared__ float partial[kWarps][kNTiles][4][32];
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kW4TileRows;
  const int64_t num_chunks = p.k / kW4TileChunkElems;
  const size_t tile_bytes =
      static_cast<size_t>(kW4TileRows) * static_cast<size_t>(p.k / kG) * (4 + kG / 2);
  const uint8_t* tile = static_cast<const uint8_t*>(p.w) + blockIdx.x * tile_bytes;
  const uint4* quant = reinterpret_cast<const uint4*>(tile) + lane;  // chunk j: quant[32 j]
  const uint2* scales =
      reinterpret_cast<const uint2*>(tile + num_chunks * kW4TileChunkBytes) + g;  // group q: [8 q]
  // Warp w's chunks [begin, end): whole units, split evenly.
  const int64_t num_units = num_chunks / kUnitChunks;
  const int64_t begin = warp * num_units / kWarps * kUnitChunks;
  const int64_t end = (warp + 1) * num_units / kWarps * kUnitChunks;
  // Token 8 j + g's x (a lane of an absent token reads the last token's:
  // its products land in output columns that are never stored).
  const T* xt[kNTiles];
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const int token = 8 * j + g < p.rows ? 8 * j + g : p.rows - 1;
    xt[j] = static_cast<const T*>(p.x) + token * p.k + 8 * c;
  }

  // A batch: kDepth chunks' quant vectors and their groups' scale pairs.
  struct Batch {
    uint4 q[kDepth];
    uint2 s[kBatchGroups];
  };
  auto load_batch = [&](Batch& b, int64_t j0) {
#pragma unroll
    for (int d = 0; d < kDepth; d += kUnitChunks) {
      if (j0 + d >= end) break;
#pragma unroll
      for (int u = 0; u < kUnitChunks; ++u) b.q[d + u] = __ldg(quant + 32 * (j0 + d + u));
#pragma unroll
      for (int q = 0; q < kUnitGroups; ++q) {
        const int i = d * 64 / kG + q;  // the batch's group
        b.s[i] = __ldg(scales + 8 * (j0 * 64 / kG + i));
      }
    }
  };
  float acc[kNTiles][4] = {};
  auto compute_batch = [&](const Batch& b, int64_t j0) {
    float sum[kNTiles][4] = {};
    GroupConsts gk = {};
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (j0 + d >= end) break;
      uint4 xv[kNTiles][2];
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
          xv[j][h] = __ldg(reinterpret_cast<const uint4*>(xt[j] + (j0 + d) * 64 + 32 * h));
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int s = 4 * d + i;     // k16 step of the batch
        if (s % kGroupSteps == 0) {  // a group starts: fresh sums
          gk = group_consts<T>(b.s[s / kGroupSteps]);
#pragma unroll
          for (int j = 0; j < kNTiles; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) sum[j][e] = 0.0f;
        }
        uint32_t a[4];
        decode_step<T>(a, word(b.q[d], i), gk);
        const int h = i >> 1, e = i & 1;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j)
          mma_16816<T>(sum[j], a, word(xv[j][h], 2 * e), word(xv[j][h], 2 * e + 1));
        if ((s + 1) % kGroupSteps == 0) {  // the group ends: acc += s * sum
#pragma unroll
          for (int j = 0; j < kNTiles; ++j) {
            acc[j][0] = fmaf(gk.sa, sum[j][0], acc[j][0]);
            acc[j][1] = fmaf(gk.sa, sum[j][1], acc[j][1]);
            acc[j][2] = fmaf(gk.sb, sum[j][2], acc[j][2]);
            acc[j][3] = fmaf(gk.sb, sum[j][3], acc[j][3]);
          }
        }
      }
    }
  };

  // Two batches alternate: one's loads in flight while the other's math runs.
  Batch b0, b1;
  if (begin < end) load_batch(b0, begin);
  for (int64_t j0 = begin; j0 < end; j0 += 2 * kDepth) {
    if (j0 + kDepth < end) load_batch(b1, j0 + kDepth);
    compute_batch(b0, j0);
    if (j0 + kDepth >= end) break;
    if (j0 + 2 * kDepth < end) load_batch(b0, j0 + 2 * kDepth);
    compute_batch(b1, j0 + kDepth);
  }
  qmma::store_tiles<T, kWarps, kNTiles>(partial, acc, p, row0);
}

template <typename T, int kG>
void launch_tiles(const QuantGemvParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n / kW4TileRows));
  if (p.rows <= 8) {
    launch_kernel(w4_tile_gemv_kernel<T, kG, 1>, grid, kWarps * 32, 0, stream, p);
  } else if (p.rows <= 16) {
    launch_kernel(w4_tile_gemv_kernel<T, kG, 2>, grid, kWarps * 32, 0, stream, p);
  } else {
    launch_kernel(w4_tile_gemv_kernel<T, kG, 4>, grid, kWarps * 32, 0, stream, p);
  }
}

}  // namespace

bool w4_tile_gemv_supports(const QuantGemvParams& p) {
  const bool in_ok = p.dtype == DType::kBF16 || p.dtype == DType::kF16;
  const bool out_ok = p.out_dtype == p.dtype || p.out_dtype == DType::kF32;
  const bool bias_ok = p.bias == nullptr || p.bias_dtype == DType::kF32 ||
                       p.bias_dtype == DType::kBF16 || p.bias_dtype == DType::kF16;
  return p.w_tiles && in_ok && out_ok && bias_ok && !has_k_perm(p.w_dtype) &&
         w4_tiles_apply(p.w_dtype, p.n, p.k) && p.rows >= 1 && p.rows <= kW4TileMaxRows &&
         p.n / kW4TileRows <= 0x7fffffff && is_aligned(p.w, 16) && is_aligned(p.x, 16);
}

W4TileKernel w4_tile_kernel_from_env() {
  static const W4TileKernel kernel = [] {
    const char* v = std::getenv("PAGODA_W4_TILE_KERNEL");
    return v != nullptr && std::strcmp(v, "v1") == 0 ? W4TileKernel::kV1 : W4TileKernel::kV2;
  }();
  return kernel;
}

cudaError_t launch_w4_tile_gemv(const QuantGemvParams& p, cudaStream_t stream) {
  return launch_w4_tile_gemv(p, w4_tile_kernel_from_env(), stream);
}

cudaError_t launch_w4_tile_gemv(const QuantGemvParams& p, W4TileKernel kernel,
                                cudaStream_t stream) {
  if (!w4_tile_gemv_supports(p)) return cudaErrorInvalidValue;
  if (kernel == W4TileKernel::kV2 && w4_tile_gemv_v2_supports(p))
    return launch_w4_tile_gemv_v2(p, stream);
  return dispatch_half(p.dtype, [&](auto t) {
    using T = decltype(t);
    switch (p.w_dtype) {
      case DType::kW4G32:
        launch_tiles<T, 32>(p, stream);
        break;
      case DType::kW4G64:
        launch_tiles<T, 64>(p, stream);
        break;
      default:
        launch_tiles<T, 128>(p, stream);
        break;
    }
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
