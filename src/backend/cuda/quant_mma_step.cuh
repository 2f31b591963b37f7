// The per-step math of the tensor-core decode kernels, shared by
// quant_mma_gemv.cu (fragments loaded from global memory) and
// quant_staged_gemv.cu (fragments read from a shared-memory copy of the
// block bytes).
//
// Tile: 16 rows of w (an m16 tile) times T <= 8 rows of x (the n8 side).
// Lane (g, c) = (lane / 4, lane % 4) holds rows g and g + 8 of the tile (A
// side, quant_fragments.cuh) and token g (B side); a step is 256 elements
// of K (8 chunks of 32). Accumulators acc[4]: (row g, token 2c),
// (g, 2c + 1), (g + 8, 2c), (g + 8, 2c + 1), f32.
#pragma once

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/mma_helpers.cuh"
#include "backend/cuda/quant_fragments.cuh"
#include "backend/cuda/quant_linear_kernels.h"

namespace pagoda::cuda::qmma {

constexpr int kTileRows = 16;
constexpr int kStepElems = 256;
constexpr int kChunks = kStepElems / 32;

// Lane (g, c)'s x elements of one step for token g (quant_fragments.cuh):
// kSplit: x[16s + 4c .. + 3] of each chunk as (x0, x1), (x2, x3);
// kRun8, kContig: x[8c .. 8c + 7] of each chunk.
struct XRaw {
  uint32_t v[kChunks][4];
};

// Lane (g, c)'s 4 x words of one 32-element chunk at x (XRaw's v[h]).
template <qfrag::XMode kX, typename T>
__device__ __forceinline__ void load_x_chunk(uint32_t (&v)[4], const T* x, int c) {
  if constexpr (kX == qfrag::XMode::kSplit) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint2 u = __ldg(reinterpret_cast<const uint2*>(x + 16 * s + 4 * c));
      v[2 * s] = u.x;
      v[2 * s + 1] = u.y;
    }
  } else {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(x + 8 * c));
    v[0] = u.x;
    v[1] = u.y;
    v[2] = u.z;
    v[3] = u.w;
  }
}

// Chunks [valid, kChunks) (past the row's end) are not read.
template <qfrag::XMode kX, typename T>
__device__ __forceinline__ void load_x(XRaw& xr, const T* x, int valid, int c) {
#pragma unroll
  for (int h = 0; h < kChunks; ++h) {
    if (h >= valid) break;
    load_x_chunk<kX>(xr.v[h], x + 32 * h, c);
  }
}

// The B pairs of k-step s of a chunk's x words v, paired as the A side.
template <qfrag::XMode kX>
__device__ __forceinline__ void x_pairs(const uint32_t (&v)[4], int s, uint32_t* lo, uint32_t* hi) {
  // kSplit, kRun8: (x0, x2), (x1, x3) of k-step s's 4 elements (words 2s,
  // 2s + 1); kContig: (e_2s, e_2s+4), (e_2s+1, e_2s+5) of the chunk's 8
  // (words s and s + 2).
  const uint32_t a = kX == qfrag::XMode::kContig ? v[s] : v[2 * s];
  const uint32_t b = kX == qfrag::XMode::kContig ? v[s + 2] : v[2 * s + 1];
  *lo = __byte_perm(a, b, 0x5410u);
  *hi = __byte_perm(a, b, 0x7632u);
}

// acc += a chunk of rows g (ka) and g + 8 (kb) times x (xv: the chunk's x
// words, load_x_chunk): per k-step (or per chunk) dl * (q . x) - ml * sum(x)
// in f32.
template <typename T, class F>
__device__ __forceinline__ void accumulate_chunk(float (&acc)[4], const qfrag::Chunk& ka,
                                                 const qfrag::Chunk& kb, const uint32_t (&xv)[4]) {
  const uint32_t kOnes[4] = {qfrag::Half2<T>::kOne, qfrag::Half2<T>::kOne, qfrag::Half2<T>::kOne,
                             qfrag::Half2<T>::kOne};
  float d[4] = {}, sx[4] = {};
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    uint32_t blo, bhi;
    x_pairs<F::kX>(xv, s, &blo, &bhi);
    const uint32_t a[4] = {ka.lo[s], kb.lo[s], ka.hi[s], kb.hi[s]};
    mma_16816<T>(d, a, blo, bhi);
    if constexpr (F::kHasMin) mma_16816<T>(sx, kOnes, blo, bhi);
    if (F::kStepScales || s == 1) {  // fold this k-step (or both) into acc
      acc[0] = fmaf(ka.dl[s], d[0], acc[0]);
      acc[1] = fmaf(ka.dl[s], d[1], acc[1]);
      acc[2] = fmaf(kb.dl[s], d[2], acc[2]);
      acc[3] = fmaf(kb.dl[s], d[3], acc[3]);
      if constexpr (F::kHasMin) {
        acc[0] = fmaf(-ka.ml[s], sx[0], acc[0]);
        acc[1] = fmaf(-ka.ml[s], sx[1], acc[1]);
        acc[2] = fmaf(-kb.ml[s], sx[0], acc[2]);
        acc[3] = fmaf(-kb.ml[s], sx[1], acc[3]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) d[i] = sx[i] = 0.0f;
    }
  }
}

// acc += the step's chunks [0, valid_chunks) of rows g (ra) and g + 8 (rb)
// times x (xr).
template <typename T, class F>
__device__ __forceinline__ void accumulate_step(float (&acc)[4], const typename F::Raw& ra,
                                                const typename F::Raw& rb, const XRaw& xr,
                                                int valid_chunks) {
#pragma unroll
  for (int h = 0; h < kChunks; ++h) {
    if (h >= valid_chunks) break;
    accumulate_chunk<T, F>(acc, F::template chunk<T>(ra, h), F::template chunk<T>(rb, h), xr.v[h]);
  }
}

// out[token, row] = v (+ bias[row]), rounded once to the out dtype: the
// store of every block decode / GEMM kernel's outputs.
template <typename T>
__device__ __forceinline__ void store_output(const QuantGemvParams& p, int64_t row, int64_t token,
                                             float v) {
  if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, row);
  const int64_t o = token * p.n + row;
  if (p.out_dtype == DType::kF32) {
    static_cast<float*>(p.out)[o] = v;
  } else {
    static_cast<T*>(p.out)[o] = from_float<T>(v);
  }
}

// Sums the kWarps warps' accumulators (each warp took its own steps of K)
// in warp order through `partial`, adds the bias and stores the tile's
// outputs out[token, row] for rows < p.n and tokens < p.rows; acc[j] holds
// n-tile j (tokens 8j .. 8j + 7). Every thread of the CTA calls it (one
// block-wide barrier).
template <typename T, int kWarps, int kNTiles>
__device__ __forceinline__ void store_tiles(float (&partial)[kWarps][kNTiles][4][32],
                                            const float (&acc)[kNTiles][4],
                                            const QuantGemvParams& p, int64_t row0) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) partial[warp][j][i][lane] = acc[j][i];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = partial[0][j][i][lane];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) v += partial[w][j][i][lane];
      const int64_t row = row0 + g + (i >= 2 ? 8 : 0);
      const int token = 8 * j + 2 * c + (i & 1);
      if (row < p.n && token < p.rows) store_output<T>(p, row, token, v);
    }
  }
}

// store_tiles of one n-tile (the decode kernels: T <= 8).
template <typename T, int kWarps>
__device__ __forceinline__ void store_tile(float (&partial)[kWarps][4][32], const float (&acc)[4],
                                           const QuantGemvParams& p, int64_t row0) {
  store_tiles<T, kWarps, 1>(reinterpret_cast<float(&)[kWarps][1][4][32]>(partial),
                            reinterpret_cast<const float(&)[1][4]>(acc), p, row0);
}

}  // namespace pagoda::cuda::qmma
