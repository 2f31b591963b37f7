// Decode products with a group-format weight (AWQ / GPTQ repacked,
// core/dtype.h; quant_linear_kernels.h): launch_group_gemv.
//
// A row of w is blocks of [s f16 | z u16 | quants], all 4-byte words
// (1 + G * bits / 32 words a block). A CTA of kWarps warps owns
// kWarps * kRowsPerWarp output features; a warp streams its kRowsPerWarp rows
// together: lane l takes the quant words l, l + 32, ... (skipping the
// header words), loading the same word of each of its rows, kUnroll words
// at a time before any math so that many independent 4-byte loads are in
// flight (a warp's 32 loads of a row are 128 contiguous bytes). Each quant
// word is 32 / bits consecutive elements of one group: its header word (an
// L1 hit, read by the lanes of the block) gives s and z, the elements are
// dequantized in registers exactly as core/block_dequant.cpp ((q - z) * s,
// one f32 multiply; q - z via the 2^23 float trick, no conversions) and
// dotted with the same columns of every x row, whose one vector load serves
// all the warp's rows. f32 accumulation, a warp reduction at the end.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/quant_linear_kernels.h"
#include "backend/cuda/stream_load.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 4;
constexpr int kUnroll = 4;

// E consecutive x elements (E = 8: 16 bytes, E = 4: 8 bytes) as floats.
template <int E>
__device__ __forceinline__ void load_x(const bf16* p, float (&f)[E]) {
  if constexpr (E == 8) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 t = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u[i]));
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  } else {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    const uint32_t u[2] = {v.x, v.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 t = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u[i]));
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  }
}
template <int E>
__device__ __forceinline__ void load_x(const f16* p, float (&f)[E]) {
  if constexpr (E == 8) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 t = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  } else {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    const uint32_t u[2] = {v.x, v.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 t = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  }
}


template <typename T, int kBits, int kGroup>
__global__ void __launch_bounds__(kThreads) group_gemv_kernel(QuantGemvParams p) {
  constexpr int kElems = 32 / kBits;                // elements per quant word
  constexpr int kQuantWords = kGroup * kBits / 32;  // per block
  constexpr int kBlockWords = 1 + kQuantWords;
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kRowsPerWarp;
  if (row0 >= p.n) return;  // whole warps only: no block-wide barrier below
  const int64_t num_blocks = p.k / kGroup;
  const int64_t row_words = num_blocks * kBlockWords;
  const int64_t quant_words = num_blocks * kQuantWords;
  const uint32_t* rows[kRowsPerWarp];
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {  // rows past n read row n - 1, never written
    const int64_t r = row0 + j < p.n ? row0 + j : p.n - 1;
    rows[j] = static_cast<const uint32_t*>(p.w) + r * row_words;
  }
  const T* x = static_cast<const T*>(p.x);
  float acc[kRowsPerWarp][kQuantGemvMaxRows] = {};
  for (int64_t base = lane; base < quant_words; base += 32 * kUnroll) {
    uint32_t q[kUnroll][kRowsPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t qw = base + 32 * u;
      const int64_t word = (qw / kQuantWords) * kBlockWords + 1 + qw % kQuantWords;
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j)
        q[u][j] = qw < quant_words ? load_stream_u32(rows[j] + word) : 0u;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t qw = base + 32 * u;
      if (qw >= quant_words) break;
      const int64_t block = qw / kQuantWords;
      const int64_t col = block * kGroup + (qw % kQuantWords) * kElems;
      float w[kRowsPerWarp][kElems];
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) {
        const uint32_t header = __ldg(rows[j] + block * kBlockWords);
        const float s = __half2float(__ushort_as_half(static_cast<unsigned short>(header)));
        const float zf = 8388608.0f + static_cast<float>(header >> 16);
#pragma unroll
        for (int e = 0; e < kElems; ++e) {
          const uint32_t v = ((q[u][j] >> (kBits * e)) & ((1u << kBits) - 1)) | 0x4B000000u;
          w[j][e] = __fmul_rn(__fsub_rn(__uint_as_float(v), zf), s);
        }
      }
#pragma unroll
      for (int m = 0; m < kQuantGemvMaxRows; ++m) {
        if (m >= p.rows) break;
        float xf[kElems];
        load_x<kElems>(x + m * p.k + col, xf);
#pragma unroll
        for (int j = 0; j < kRowsPerWarp; ++j)
#pragma unroll
          for (int e = 0; e < kElems; ++e) acc[j][m] = fmaf(w[j][e], xf[e], acc[j][m]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    const int64_t row = row0 + j;
#pragma unroll
    for (int m = 0; m < kQuantGemvMaxRows; ++m) {
      if (m >= p.rows) break;
      float v = warp_sum(acc[j][m]);
      if (lane == 0 && row < p.n) {
        if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, row);
        const int64_t o = m * p.n + row;
        if (p.out_dtype == DType::kF32) {
          static_cast<float*>(p.out)[o] = v;
        } else {
          static_cast<T*>(p.out)[o] = from_float<T>(v);
        }
      }
    }
  }
}

template <typename T, int kBits, int kGroup>
cudaError_t launch_typed(const QuantGemvParams& p, cudaStream_t stream) {
  const int64_t blocks = ceil_div(p.n, kWarps * kRowsPerWarp);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  launch_kernel(group_gemv_kernel<T, kBits, kGroup>, dim3(static_cast<unsigned>(blocks)), kThreads,
                0, stream, p);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_format(const QuantGemvParams& p, cudaStream_t stream) {
  switch (p.w_dtype) {
    case DType::kW4G32:
      return launch_typed<T, 4, 32>(p, stream);
    case DType::kW4G64:
      return launch_typed<T, 4, 64>(p, stream);
    case DType::kW4G128:
      return launch_typed<T, 4, 128>(p, stream);
    case DType::kW8G32:
      return launch_typed<T, 8, 32>(p, stream);
    case DType::kW8G64:
      return launch_typed<T, 8, 64>(p, stream);
    case DType::kW8G128:
      return launch_typed<T, 8, 128>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool group_gemv_supports(const QuantGemvParams& p) {
  if (p.w_tiles) return false;  // the tile layout (w4_tiles.h): launch_w4_tile_gemv only
  const bool in_ok = p.dtype == DType::kBF16 || p.dtype == DType::kF16;
  const bool out_ok = p.out_dtype == p.dtype || p.out_dtype == DType::kF32;
  const bool bias_ok = p.bias == nullptr || p.bias_dtype == DType::kF32 ||
                       p.bias_dtype == DType::kBF16 || p.bias_dtype == DType::kF16;
  return in_ok && out_ok && bias_ok && is_group_dtype(p.w_dtype) && !has_k_perm(p.w_dtype) &&
         p.rows >= 1 && p.rows <= kQuantGemvMaxRows && p.n > 0 && p.k > 0 &&
         p.k % dtype_block_elems(p.w_dtype) == 0 && is_aligned(p.x, 16) && is_aligned(p.w, 4);
}

cudaError_t launch_group_gemv(const QuantGemvParams& p, cudaStream_t stream) {
  if (!group_gemv_supports(p)) return cudaErrorInvalidValue;
  return dispatch_half(p.dtype, [&](auto t) { return launch_format<decltype(t)>(p, stream); });
}

}  // namespace pagoda::cuda
