// Products with many rows of x (T >= kQuantTiledMinRows, any T) and a
// block-format weight on the tensor cores, the weight kept in its blocks:
// launch_quant_tiled_gemm (quant_linear_kernels.h). out[T, N] = x[T, K] w^T.
//
// Why: above the wide kernel's 32 rows every block format was dequantized
// to a bf16 copy each call (2 B / element written and read again) for a
// cuBLASLt GEMM: at 64 rows ~3x the bf16 GEMM's bytes (H100, q4_K 8B
// gate_up 233.7 us against ~85 for bf16). Here each weight byte is read
// from DRAM once per CTA column of tokens and decoded in registers.
//
// Tiles: a CTA of 4 warps (2 along N x 2 along T) owns 64 output features
// x 64 tokens (grid: x = token tiles, so the CTAs reading the same weight
// rows run together and share them in L2; y = feature tiles). A warp owns
// 32 features (2 m16 tiles) x 32 tokens (4 n8 tiles): 16 f32 accumulator
// quads. K runs in 256-element steps; each step's x tile (64 tokens x 256
// elements) and the 64 rows' step bytes (the format's blocks of those 256
// elements) are copied into shared memory with 16-byte cp.async copies,
// kStages buffers (the next step's copies in flight during this step's
// math). A weight row's bytes are copied from the 16-byte aligned address at
// or before them, so in shared memory they keep their address mod 16 and
// the format loaders (quant_fragments.cuh, F::load<SharedLoads>) read them
// with the alignment they were written for.
//
// Per step a warp reads its 4 rows' Raw (rows g, g + 8 of each m-tile;
// the same fields the decode kernel loads from global memory), then per
// 32-element chunk decodes the 2 m-tiles' A fragments once (F::chunk) and
// multiplies them with its 4 n8 tiles of x: lane (g, c) reads token g's
// chunk elements in the format's k-order (quant_fragments.cuh: 16 bytes at
// 16c, or 2 x 8 at 8c and 32 + 8c) with vector shared loads, which fetch
// the same bytes per lane as ldmatrix.x4 would but in the permuted order
// the A fragments use. Formats with a min (q4_1, q4_K, q5_K) get sum(x)
// from one more mma with A = ones per n-tile and k-step, shared by the two
// m-tiles (1.5x the mma count of the product itself).
//
// Shared memory: x rows 576 bytes apart (512 + 64: the 8 tokens of a warp
// load fall 4 16-byte units apart mod 8, so 16-byte reads are
// conflict-free), weight rows an odd number of 16-byte units apart. Per
// stage 36 KiB of x plus 64 x 176 B (q4_K) .. 64 x 304 B (q8_0) of weight;
// 2 stages: 94..112 KiB, 2 CTAs a SM.
//
// Numerics: those of quant_mma_gemv.cu (exact integer quants times x in
// the tensor core, f32 scale and min per 16 / 32 elements, f32 sums in K
// order); deterministic (no split-K, no atomics), graph-capturable.
//
// Reads outside the weight: as quant_staged_gemv.cu, a copy starts at the
// 16-byte aligned address at or before a row's step, so with w not 16-byte
// aligned the first copy reads up to 14 bytes before w (its granule); those
// bytes are not used. Rows past n read row n - 1 and tokens past T read
// token T - 1; neither is stored.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/mma_helpers.cuh"
#include "backend/cuda/quant_fragments.cuh"
#include "backend/cuda/quant_linear_kernels.h"
#include "backend/cuda/quant_mma_step.cuh"

namespace pagoda::cuda {
namespace {

using qmma::kChunks;
using qmma::kStepElems;
using qmma::kTileRows;

constexpr int kWarpMTiles = 2;  // m16 tiles a warp
constexpr int kWarpNTiles = 4;  // n8 tiles a warp
constexpr int kWarpsM = 2, kWarpsN = 2;
constexpr int kWarps = kWarpsM * kWarpsN;
constexpr int kThreads = kWarps * 32;
constexpr int kCtaRows = kWarpsM * kWarpMTiles * kTileRows;  // 64 output features
constexpr int kCtaTokens = kWarpsN * kWarpNTiles * 8;        // 64 rows of x
constexpr int kStages = 2;
constexpr int kXRowBytes = kStepElems * 2 + 64;  // 576: see the header
constexpr int kXStageBytes = kCtaTokens * kXRowBytes;

// Shared-memory geometry of format F's steps.
template <class F>
struct TiledShape {
  static constexpr int kStepBytes = F::kStepBlocks * F::kBytes;  // a row's bytes of one step
  // 16-byte chunks holding kStepBytes bytes from an offset of up to 15 into
  // the first chunk.
  static constexpr int kSpanChunks = (15 + kStepBytes + 15) / 16;
  static constexpr int kRowStride = 16 * (kSpanChunks | 1);
  static constexpr int kStageBytes = kXStageBytes + kCtaRows * kRowStride;
  static constexpr int kSmemBytes = kStages * kStageBytes;
};

// Copies the first `bytes` (1..16) of the 16 bytes at src (16-byte aligned)
// to shared memory at dst, zero-filling the rest; bytes past them are not
// read.
__device__ __forceinline__ void cp_async_upto_16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
}

// Lane (g, c)'s 4 x words of one 32-element chunk at x (shared memory):
// the elements load_x_chunk (quant_mma_step.cuh) reads from global memory.
template <qfrag::XMode kX, typename T>
__device__ __forceinline__ void load_x_chunk_shared(uint32_t (&v)[4], const T* x, int c) {
  if constexpr (kX == qfrag::XMode::kSplit) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint2 u = *reinterpret_cast<const uint2*>(x + 16 * s + 4 * c);
      v[2 * s] = u.x;
      v[2 * s + 1] = u.y;
    }
  } else {
    const uint4 u = *reinterpret_cast<const uint4*>(x + 8 * c);
    v[0] = u.x;
    v[1] = u.y;
    v[2] = u.z;
    v[3] = u.w;
  }
}

// acc[i] += chunk ka[i] / kb[i] (rows g, g + 8 of m-tile i) times one n8
// tile of x (xv): the arithmetic of qmma::accumulate_chunk, with sum(x)
// (formats with a min) computed once for the m-tiles.
template <typename T, class F>
__device__ __forceinline__ void accumulate_tile(float (&acc)[kWarpMTiles][4],
                                                const qfrag::Chunk (&ka)[kWarpMTiles],
                                                const qfrag::Chunk (&kb)[kWarpMTiles],
                                                const uint32_t (&xv)[4]) {
  static_assert(!(F::kHasMin && F::kStepScales), "sum(x) is per chunk");
  const uint32_t kOnes[4] = {qfrag::Half2<T>::kOne, qfrag::Half2<T>::kOne, qfrag::Half2<T>::kOne,
                             qfrag::Half2<T>::kOne};
  uint32_t blo[2], bhi[2];
#pragma unroll
  for (int s = 0; s < 2; ++s) qmma::x_pairs<F::kX>(xv, s, &blo[s], &bhi[s]);
  float sx[4] = {};
  if constexpr (F::kHasMin) {
#pragma unroll
    for (int s = 0; s < 2; ++s) mma_16816<T>(sx, kOnes, blo[s], bhi[s]);
  }
#pragma unroll
  for (int i = 0; i < kWarpMTiles; ++i) {
    float d[4] = {};
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint32_t a[4] = {ka[i].lo[s], kb[i].lo[s], ka[i].hi[s], kb[i].hi[s]};
      mma_16816<T>(d, a, blo[s], bhi[s]);
      if (F::kStepScales || s == 1) {  // fold this k-step (or both) into acc
        acc[i][0] = fmaf(ka[i].dl[s], d[0], acc[i][0]);
        acc[i][1] = fmaf(ka[i].dl[s], d[1], acc[i][1]);
        acc[i][2] = fmaf(kb[i].dl[s], d[2], acc[i][2]);
        acc[i][3] = fmaf(kb[i].dl[s], d[3], acc[i][3]);
        if constexpr (F::kHasMin) {
          acc[i][0] = fmaf(-ka[i].ml[s], sx[0], acc[i][0]);
          acc[i][1] = fmaf(-ka[i].ml[s], sx[1], acc[i][1]);
          acc[i][2] = fmaf(-kb[i].ml[s], sx[0], acc[i][2]);
          acc[i][3] = fmaf(-kb[i].ml[s], sx[1], acc[i][3]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) d[e] = 0.0f;
      }
    }
  }
}

template <typename T, class F>
__global__ void __launch_bounds__(kThreads) quant_tiled_gemm_kernel(QuantGemvParams p) {
  using S = TiledShape<F>;
  extern __shared__ __align__(16) uint8_t smem[];
  pdl_enter();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int64_t token0 = static_cast<int64_t>(blockIdx.x) * kCtaTokens;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kCtaRows;
  const int64_t num_steps = p.k / kStepElems;
  const size_t row_bytes = static_cast<size_t>(p.k / F::kElems) * F::kBytes;
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const T* x = static_cast<const T*>(p.x);
  auto row_start = [&](int r) {  // CTA row r's first byte (rows past n: row n - 1)
    const int64_t row = row0 + r < p.n ? row0 + r : p.n - 1;
    return reinterpret_cast<uintptr_t>(w) + static_cast<size_t>(row) * row_bytes;
  };

  // The copies of step `step` into buffer b: x's 64 tokens x 32 chunks,
  // then the 64 weight rows' kSpanChunks chunks each.
  auto issue = [&](int64_t step, int b) {
    uint8_t* xs = smem + b * S::kStageBytes;
    uint8_t* ws = xs + kXStageBytes;
    for (int i = tid; i < kCtaTokens * 32; i += kThreads) {
      const int t = i / 32, ch = i % 32;
      const int64_t token = token0 + t < p.rows ? token0 + t : p.rows - 1;
      cp_async_16(smem_addr(xs + t * kXRowBytes + 16 * ch),
                  x + token * p.k + step * kStepElems + 8 * ch, true);
    }
    for (int i = tid; i < kCtaRows * S::kSpanChunks; i += kThreads) {
      const int r = i / S::kSpanChunks, ch = i % S::kSpanChunks;
      const uintptr_t start = row_start(r) + static_cast<size_t>(step) * S::kStepBytes;
      const int left = static_cast<int>(start & 15u) + S::kStepBytes - 16 * ch;
      if (left > 0) {
        cp_async_upto_16(smem_addr(ws + r * S::kRowStride + 16 * ch),
                         reinterpret_cast<const void*>((start & ~uintptr_t{15}) + 16 * ch),
                         left < 16 ? left : 16);
      }
    }
  };

  // This warp's rows: m-tile i's rows g (a) and g + 8 (b).
  uintptr_t start_a[kWarpMTiles], start_b[kWarpMTiles];
  int slot_a[kWarpMTiles], slot_b[kWarpMTiles];
#pragma unroll
  for (int i = 0; i < kWarpMTiles; ++i) {
    const int ra = (wm * kWarpMTiles + i) * kTileRows + g;
    start_a[i] = row_start(ra);
    start_b[i] = row_start(ra + 8);
    slot_a[i] = kXStageBytes + ra * S::kRowStride;
    slot_b[i] = kXStageBytes + (ra + 8) * S::kRowStride;
  }

  float acc[kWarpMTiles][kWarpNTiles][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_steps) issue(s, s);
    cp_async_commit();
  }
  for (int64_t step = 0; step < num_steps; ++step) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // step's copies visible; buffer (step - 1) % kStages free
    const int64_t next = step + kStages - 1;
    if (next < num_steps) issue(next, static_cast<int>(next % kStages));
    cp_async_commit();

    const uint8_t* stage = smem + static_cast<int>(step % kStages) * S::kStageBytes;
    const size_t step_off = static_cast<size_t>(step) * S::kStepBytes;
    typename F::Raw raw_a[kWarpMTiles], raw_b[kWarpMTiles];
#pragma unroll
    for (int i = 0; i < kWarpMTiles; ++i) {
      const int head_a = static_cast<int>((start_a[i] + step_off) & 15u);
      const int head_b = static_cast<int>((start_b[i] + step_off) & 15u);
      F::template load<qfrag::SharedLoads>(raw_a[i], stage + slot_a[i] + head_a, F::kStepBlocks,
                                           c);
      F::template load<qfrag::SharedLoads>(raw_b[i], stage + slot_b[i] + head_b, F::kStepBlocks,
                                           c);
    }
    const T* xs = reinterpret_cast<const T*>(stage + (wn * kWarpNTiles * 8 + g) * kXRowBytes);
#pragma unroll
    for (int h = 0; h < kChunks; ++h) {
      qfrag::Chunk ka[kWarpMTiles], kb[kWarpMTiles];
#pragma unroll
      for (int i = 0; i < kWarpMTiles; ++i) {
        ka[i] = F::template chunk<T>(raw_a[i], h);
        kb[i] = F::template chunk<T>(raw_b[i], h);
      }
#pragma unroll
      for (int j = 0; j < kWarpNTiles; ++j) {
        uint32_t xv[4];
        load_x_chunk_shared<F::kX>(xv, xs + j * 8 * (kXRowBytes / 2) + 32 * h, c);
        float tile[kWarpMTiles][4];
#pragma unroll
        for (int i = 0; i < kWarpMTiles; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) tile[i][e] = acc[i][j][e];
        }
        accumulate_tile<T, F>(tile, ka, kb, xv);
#pragma unroll
        for (int i = 0; i < kWarpMTiles; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = tile[i][e];
        }
      }
    }
  }

  // out[token, row] (+ bias): acc[i][j] = (row g, token 2c), (g, 2c + 1),
  // (g + 8, 2c), (g + 8, 2c + 1) of m-tile i, n-tile j.
#pragma unroll
  for (int i = 0; i < kWarpMTiles; ++i) {
#pragma unroll
    for (int j = 0; j < kWarpNTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = row0 + (wm * kWarpMTiles + i) * kTileRows + g + (e >= 2 ? 8 : 0);
        const int64_t token = token0 + (wn * kWarpNTiles + j) * 8 + 2 * c + (e & 1);
        if (row < p.n && token < p.rows) qmma::store_output<T>(p, row, token, acc[i][j][e]);
      }
    }
  }
}

// Calls f(F{}) with the traits of a format this kernel takes; false for
// the others.
template <typename Fn>
bool dispatch_tiled_format(DType t, Fn&& f) {
  switch (t) {
    case DType::kQ4_0: f(qfrag::FmtQ4_0{}); return true;
    case DType::kQ4_1: f(qfrag::FmtQ4_1{}); return true;
    case DType::kQ8_0: f(qfrag::FmtQ8_0{}); return true;
    case DType::kQ4_K: f(qfrag::FmtQ45K<false>{}); return true;
    case DType::kQ5_K: f(qfrag::FmtQ45K<true>{}); return true;
    case DType::kQ6_K: f(qfrag::FmtQ6K{}); return true;
    case DType::kW4G32: f(qfrag::FmtGroup<4, 32>{}); return true;
    case DType::kW4G64: f(qfrag::FmtGroup<4, 64>{}); return true;
    case DType::kW4G128: f(qfrag::FmtGroup<4, 128>{}); return true;
    case DType::kW8G32: f(qfrag::FmtGroup<8, 32>{}); return true;
    case DType::kW8G64: f(qfrag::FmtGroup<8, 64>{}); return true;
    case DType::kW8G128: f(qfrag::FmtGroup<8, 128>{}); return true;
    default: return false;
  }
}

template <typename T>
cudaError_t configure_type() {
  cudaError_t e = cudaSuccess;
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K,
                  DType::kQ6_K, DType::kW4G32, DType::kW4G64, DType::kW4G128, DType::kW8G32,
                  DType::kW8G64, DType::kW8G128}) {
    dispatch_tiled_format(t, [&](auto f) {
      using F = decltype(f);
      const cudaError_t r =
          cudaFuncSetAttribute(quant_tiled_gemm_kernel<T, F>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               TiledShape<F>::kSmemBytes);
      if (e == cudaSuccess) e = r;
    });
  }
  return e;
}

}  // namespace

bool quant_tiled_gemm_supports(const QuantGemvParams& p) {
  if (p.w_tiles) return false;  // the tile layout (w4_tiles.h): launch_w4_tile_gemv only
  const bool in_ok = p.dtype == DType::kBF16 || p.dtype == DType::kF16;
  const bool out_ok = p.out_dtype == p.dtype || p.out_dtype == DType::kF32;
  const bool bias_ok = p.bias == nullptr || p.bias_dtype == DType::kF32 ||
                       p.bias_dtype == DType::kBF16 || p.bias_dtype == DType::kF16;
  int align = 0;
  if (!dispatch_tiled_format(p.w_dtype, [&](auto f) { align = decltype(f)::kAlign; }))
    return false;
  return in_ok && out_ok && bias_ok && p.rows >= 1 && p.n > 0 && p.k > 0 &&
         p.k % kStepElems == 0 && is_aligned(p.x, 16) &&
         is_aligned(p.w, static_cast<uintptr_t>(align));
}

cudaError_t init_quant_tiled_gemm() {
  const cudaError_t e = configure_type<bf16>();
  return e != cudaSuccess ? e : configure_type<f16>();
}

cudaError_t launch_quant_tiled_gemm(const QuantGemvParams& p, cudaStream_t stream) {
  if (!quant_tiled_gemm_supports(p)) return cudaErrorInvalidValue;
  const int64_t row_tiles = ceil_div(p.n, kCtaRows);
  if (row_tiles > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(ceil_div(p.rows, kCtaTokens)),
                  static_cast<unsigned>(row_tiles));
  return dispatch_half(p.dtype, [&](auto t) {
    using T = decltype(t);
    dispatch_tiled_format(p.w_dtype, [&](auto f) {
      using F = decltype(f);
      launch_kernel(quant_tiled_gemm_kernel<T, F>, grid, kThreads, TiledShape<F>::kSmemBytes,
                    stream, p);
    });
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
