// The two conversions of the 4-bit tile layout (w4_tiles.h):
// launch_w4_tile_repack (row-of-blocks -> tiles, once per weight at load)
// and launch_w4_tile_dequantize (tiles -> bf16 / f16 rows, the larger-batch
// path). Both run one thread per output vector; neither is on the decode path.
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/w4_tiles.h"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 256;

// Nibble q of element (row, col) of a row-of-blocks 4-bit weight (dtype.h).
template <int kG>
__device__ __forceinline__ uint32_t block_nibble(const uint8_t* w, size_t row_bytes, int64_t row,
                                                 int64_t col) {
  const uint8_t* block =
      w + static_cast<size_t>(row) * row_bytes + static_cast<size_t>(col / kG) * (4 + kG / 2);
  const int e = static_cast<int>(col % kG);
  return (block[4 + e / 2] >> (4 * (e & 1))) & 0xFu;
}

// Block x = tile; its threads write the tile's chunks' lane vectors (items
// [0, chunks * 32)) and its groups' row-pair scales (the rest).
template <int kG>
__global__ void __launch_bounds__(kThreads) w4_tile_repack_kernel(W4TileRepackParams p) {
  pdl_enter();
  const int64_t num_chunks = p.k / kW4TileChunkElems, num_groups = p.k / kG;
  const size_t row_bytes = static_cast<size_t>(num_groups) * (4 + kG / 2);
  const size_t tile_bytes = kW4TileRows * row_bytes;
  const int64_t tile = blockIdx.x;
  const uint8_t* src = static_cast<const uint8_t*>(p.src) + tile * tile_bytes;
  uint8_t* dst = static_cast<uint8_t*>(p.dst) + tile * tile_bytes;
  for (int64_t item = threadIdx.x; item < num_chunks * 32 + num_groups * 8; item += kThreads) {
    if (item < num_chunks * 32) {
      const int64_t j = item / 32;
      const int lane = static_cast<int>(item % 32), g = lane / 4, c = lane % 4;
      uint32_t words[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = i >> 1, e = i & 1;
        uint32_t v = 0;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const int64_t row = g + 8 * (n & 1);
          const int64_t col = 64 * j + 32 * h + 8 * c + 4 * e + 2 * ((n >> 1) & 1) + (n >> 2);
          v |= block_nibble<kG>(src, row_bytes, row, col) << (4 * n);
        }
        words[i] = v;
      }
      reinterpret_cast<uint4*>(dst)[item] = make_uint4(words[0], words[1], words[2], words[3]);
    } else {
      const int64_t r = item - num_chunks * 32, q = r / 8;
      const int g = static_cast<int>(r % 8);
      const uint32_t* a = reinterpret_cast<const uint32_t*>(src + g * row_bytes + q * (4 + kG / 2));
      const uint32_t* b =
          reinterpret_cast<const uint32_t*>(src + (g + 8) * row_bytes + q * (4 + kG / 2));
      reinterpret_cast<uint2*>(dst + num_chunks * kW4TileChunkBytes)[r] = make_uint2(*a, *b);
    }
  }
}

// One thread per 8 consecutive columns 64 j + 32 h + 8 c .. of one row: the
// two quant words 2h, 2h + 1 of lane (row % 8, c) in chunk j, its half
// (row / 8 % 2) of their nibbles. kPerm: column i goes to p.k_perm[i].
template <typename T, int kG, bool kPerm>
__global__ void __launch_bounds__(kThreads) w4_tile_dequantize_kernel(DequantizeBlocksParams p) {
  pdl_enter();
  const int64_t per_row = p.k / 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= p.num_rows * per_row) return;
  const int64_t r = i / per_row, col0 = (i % per_row) * 8;
  const int64_t row = p.first_row + r, tile = row / kW4TileRows;
  const int rr = static_cast<int>(row % kW4TileRows), g = rr % 8, upper = rr / 8;
  const int64_t j = col0 / 64;
  const int h = static_cast<int>(col0 / 32 % 2), c = static_cast<int>(col0 / 8 % 4);
  const int64_t num_chunks = p.k / kW4TileChunkElems;
  const size_t tile_bytes = kW4TileRows * static_cast<size_t>(p.k / kG) * (4 + kG / 2);
  const uint8_t* t = static_cast<const uint8_t*>(p.w) + tile * tile_bytes;
  const uint2 qw =
      *reinterpret_cast<const uint2*>(t + j * kW4TileChunkBytes + (4 * g + c) * 16 + h * 8);
  const uint32_t sz = *reinterpret_cast<const uint32_t*>(
      t + num_chunks * kW4TileChunkBytes + (col0 / kG) * kW4TileGroupBytes + g * 8 + upper * 4);
  const float s = __half2float(__ushort_as_half(static_cast<unsigned short>(sz & 0xFFFFu)));
  const int z = static_cast<int>(sz >> 16);
  T v[8];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const uint32_t w = e == 0 ? qw.x : qw.y;
#pragma unroll
    for (int o = 0; o < 4; ++o) {  // column col0 + 4 e + o is nibble upper + {0, 4, 2, 6}[o]
      const int n = upper + ((o & 1) << 2) + ((o >> 1) << 1);
      const int q = static_cast<int>((w >> (4 * n)) & 0xFu);
      v[4 * e + o] = from_float<T>(static_cast<float>(q - z) * s);
    }
  }
  T* out = static_cast<T*>(p.out) + r * p.k;
  if constexpr (kPerm) {
#pragma unroll
    for (int e = 0; e < 8; ++e) out[__ldg(p.k_perm + col0 + e)] = v[e];
  } else {
    Vec<T, 8> vec;
#pragma unroll
    for (int e = 0; e < 8; ++e) vec.v[e] = v[e];
    store_vec(out + col0, vec);
  }
}

int group_of(DType t) {
  return static_cast<int>(dtype_block_elems(t));
}

}  // namespace

cudaError_t launch_w4_tile_repack(const W4TileRepackParams& p, cudaStream_t stream) {
  if (!w4_tiles_apply(p.w_dtype, kW4TileRows, p.k) || p.num_tiles < 0 || p.num_tiles > 0x7fffffff ||
      !is_aligned(p.src, 4) || !is_aligned(p.dst, 16))
    return cudaErrorInvalidValue;
  if (p.num_tiles == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(p.num_tiles));
  switch (group_of(p.w_dtype)) {
    case 32:
      launch_kernel(w4_tile_repack_kernel<32>, grid, kThreads, 0, stream, p);
      break;
    case 64:
      launch_kernel(w4_tile_repack_kernel<64>, grid, kThreads, 0, stream, p);
      break;
    default:
      launch_kernel(w4_tile_repack_kernel<128>, grid, kThreads, 0, stream, p);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_w4_tile_dequantize(const DequantizeBlocksParams& p, cudaStream_t stream) {
  if (!p.w_tiles || !w4_tiles_apply(p.w_dtype, kW4TileRows, p.k) || p.num_rows < 0 ||
      p.first_row < 0 || !is_aligned(p.out, 16) || !is_aligned(p.w, 16) ||
      has_k_perm(p.w_dtype) != (p.k_perm != nullptr))
    return cudaErrorInvalidValue;
  if (p.num_rows == 0) return cudaSuccess;
  const int64_t blocks = ceil_div(p.num_rows * (p.k / 8), kThreads);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks));
  return dispatch_half(p.out_dtype, [&](auto t) {
    using T = decltype(t);
    auto run = [&](auto g) {
      constexpr int kG = decltype(g)::value;
      if (p.k_perm != nullptr) {
        launch_kernel(w4_tile_dequantize_kernel<T, kG, true>, grid, kThreads, 0, stream, p);
      } else {
        launch_kernel(w4_tile_dequantize_kernel<T, kG, false>, grid, kThreads, 0, stream, p);
      }
    };
    switch (group_of(p.w_dtype)) {
      case 32:
        run(std::integral_constant<int, 32>{});
        break;
      case 64:
        run(std::integral_constant<int, 64>{});
        break;
      default:
        run(std::integral_constant<int, 128>{});
        break;
    }
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
