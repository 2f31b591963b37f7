// Decode products (T = 1..8 rows of x) with a block-format weight on the
// tensor cores: launch_quant_mma_gemv (quant_linear_kernels.h), for q4_0,
// q4_1, q5_0, q5_1, q8_0, q2_K..q6_K and the group formats w4g* / w8g*
// (loaders: quant_fragments.cuh, quant_fragments_q5.cuh,
// quant_fragments_q23k.cuh).
// launch_quant_mma_wide takes T = 9..64 (quant_mma_wide_kernel, below):
// the same layout with each decoded chunk reused for up to 4 n8 tiles of x.
//
// Why: the CUDA-core kernels (quant_gemv.cu, group_gemv.cu) spend per weight
// element a byte load from shared memory or a shift, an int -> f32
// conversion, the scale multiply, an x bf16 -> f32 unpack and an FMA per x
// row; at T = 1 on an H200 that held q4_K and w4g128 at 22..37% of the copy
// ceiling. Here the integer quants become exact bf16 / f16 mma A operands
// (quant_fragments.cuh: ~1 integer op + half a packed subtract per element
// for nibbles), x is the B operand (its 8 columns are the T <= 8 rows, so
// T = 2..8 cost what T = 1 does), and the scales are applied in f32 once per
// 16 or 32 elements to the f32 mma partial sums:
//   out[t, r] = sum over k-steps of dl(r) * (q(r) . x(t)) - ml(r) * sum x(t),
// where sum x(t) is one more mma with A = ones (formats with a min only).
//
// Layout: a CTA of kWarps warps owns 16 output features (one m16 tile);
// warp w takes steps w, w + kWarps, ... of 256 elements of K (split-K inside
// the CTA), its lanes reading their share of the 16 rows' blocks (u32 / u16
// read-only loads; the next step's are issued before the current step's
// math) and of x (L1). The warps' f32 tiles are summed in shared memory in warp order, then the
// bias is added and the 16 x T outputs are stored. A warp has one step's
// loads in flight while it computes, so the bytes in flight per SM scale
// with its resident warps: under 1024 tiles (N < 16384: the 8B model's qkv,
// o_proj, down) a CTA has 8 warps (N = 4096: 2048 warps, ~15 per SM of 132),
// else 4 (more CTAs fit an SM when the registers bound it).
//
// Numerics: every product q * x is exact and summed in f32 by the tensor
// core; dl, ml are the f32 values core/block_dequant.cpp uses. The result
// differs from the CPU backend (sum of rounded dl * q - ml times x) only in
// f32 rounding and summation order. Deterministic (fixed order, no
// atomics), graph-capturable.
//
// Estimate at T = 1, q4_K (0.5625 B / element; 4.8 TB/s is ~33 elements
// per clock per SM on an H200): per element ~0.9 integer ops for the
// nibbles, ~0.4 for the scale decode (done by each lane of a quad) and 0.25
// for the x pairing, so ~1.5 of the 64 integer ops / clock / SM: ~75% of
// the integer pipe at memory speed, against ~6 integer + 4 f32 ops per
// element in the CUDA-core kernels. The f16x2 / f32 work (~1.5 / element)
// and the mma (2 per 16 x 16 tile, ~25% of the tensor pipe) are below
// their ceilings. w4g128: ~1.1 integer ops / element. L1: a warp load
// touches 8 rows (8 wavefronts, ~1 per clock per SM): q4_K's 10 loads per
// lane and step (16-byte header, 8-byte quants) are ~80 wavefronts against
// ~125 clocks of DRAM time per warp-step; w4g128's 20 u32 loads ~160
// against ~118, and the u16-loaded q4_0 / q5_0 / q8_0 / q3_K / q6_K more: those are
// likely bound by L1 wavefronts before DRAM. Not yet measured. (q4_0,
// q4_1 and q8_0 run by default on quant_staged_gemv.cu, the same step math
// on a shared-memory copy of the blocks made with 16-byte copies.)
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/quant_fragments.cuh"
#include "backend/cuda/quant_fragments_q23k.cuh"
#include "backend/cuda/quant_fragments_q5.cuh"
#include "backend/cuda/quant_linear_kernels.h"
#include "backend/cuda/quant_mma_step.cuh"

namespace pagoda::cuda {
namespace {

using qmma::kStepElems;
using qmma::kTileRows;
constexpr int64_t kManyTiles = 1024;  // from here on 4 warps a CTA, else 8
// quant_mma_wide_kernel: warps a CTA (its registers allow ~2 CTAs an SM),
// and rows of x a launch (4 n-tiles of 8).
constexpr int kWideWarps = 4;
constexpr int kWideTokens = 32;

template <typename T, class F, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) quant_mma_gemv_kernel(QuantGemvParams p) {
  __shared__ float partial[kWarps][4][32];
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  // Rows past n read row n - 1 (never written).
  const int64_t ra = row0 + g < p.n ? row0 + g : p.n - 1;
  const int64_t rb = row0 + g + 8 < p.n ? row0 + g + 8 : p.n - 1;
  const int64_t num_blocks = p.k / F::kElems;
  const size_t row_bytes = static_cast<size_t>(num_blocks) * F::kBytes;
  const uint8_t* wa = static_cast<const uint8_t*>(p.w) + static_cast<size_t>(ra) * row_bytes;
  const uint8_t* wb = static_cast<const uint8_t*>(p.w) + static_cast<size_t>(rb) * row_bytes;
  const bool has_x = g < p.rows;  // token g; lanes of absent tokens give B = 0
  const T* xg = static_cast<const T*>(p.x) + static_cast<int64_t>(has_x ? g : 0) * p.k;
  const int64_t num_steps = (num_blocks + F::kStepBlocks - 1) / F::kStepBlocks;
  auto valid_blocks = [&](int64_t step) {
    const int64_t left = num_blocks - step * F::kStepBlocks;
    return static_cast<int>(left < F::kStepBlocks ? left : F::kStepBlocks);
  };

  float acc[4] = {};  // (row g, token 2c), (g, 2c + 1), (g + 8, 2c), (g + 8, 2c + 1)
  typename F::Raw cur_a, cur_b;
  int64_t step = warp;
  if (step < num_steps) {
    const size_t off = static_cast<size_t>(step) * F::kStepBlocks * F::kBytes;
    F::load(cur_a, wa + off, valid_blocks(step), c);
    F::load(cur_b, wb + off, valid_blocks(step), c);
  }
  for (; step < num_steps; step += kWarps) {
    typename F::Raw next_a, next_b;
    const int64_t next = step + kWarps;
    if (next < num_steps) {  // in flight during this step's math
      const size_t off = static_cast<size_t>(next) * F::kStepBlocks * F::kBytes;
      F::load(next_a, wa + off, valid_blocks(next), c);
      F::load(next_b, wb + off, valid_blocks(next), c);
    }
    const int valid_chunks = valid_blocks(step) * F::kElems / 32;
    qmma::XRaw xr = {};
    if (has_x) qmma::load_x<F::kX>(xr, xg + step * kStepElems, valid_chunks, c);
    qmma::accumulate_step<T, F>(acc, cur_a, cur_b, xr, valid_chunks);
    cur_a = next_a;
    cur_b = next_b;
  }
  qmma::store_tile<T, kWarps>(partial, acc, p, row0);
}

// The same product for T = 9..kQuantWideMaxRows rows of x, kNTiles * 8 at a
// time (launch_quant_mma_wide): the layout and loads of
// quant_mma_gemv_kernel, but each chunk of the 16 rows is decoded into A
// fragments once and multiplied with the kNTiles n8 tiles of x (tokens
// 8j + g, read per chunk from L1 / L2), f32 accumulators per tile.
// Registers (ptxas, sm_90a): 96..170 a thread at 2 tiles, 138..215 at 4;
// 8 tiles would need ~64 more (acc + x words), hence 32-row launches.
// Not yet measured: each CTA reads its K of all T rows of x, at T = 32
// ~7x its 4-bit blocks' bytes (~3.8x for q8_0), served by L2.
template <typename T, class F, int kWarps, int kNTiles>
__global__ void __launch_bounds__(kWarps * 32) quant_mma_wide_kernel(QuantGemvParams p) {
  __shared__ float partial[kWarps][kNTiles][4][32];
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  // Rows past n read row n - 1 (never written).
  const int64_t ra = row0 + g < p.n ? row0 + g : p.n - 1;
  const int64_t rb = row0 + g + 8 < p.n ? row0 + g + 8 : p.n - 1;
  const int64_t num_blocks = p.k / F::kElems;
  const size_t row_bytes = static_cast<size_t>(num_blocks) * F::kBytes;
  const uint8_t* wa = static_cast<const uint8_t*>(p.w) + static_cast<size_t>(ra) * row_bytes;
  const uint8_t* wb = static_cast<const uint8_t*>(p.w) + static_cast<size_t>(rb) * row_bytes;
  const T* x = static_cast<const T*>(p.x);
  const int64_t num_steps = (num_blocks + F::kStepBlocks - 1) / F::kStepBlocks;
  auto valid_blocks = [&](int64_t step) {
    const int64_t left = num_blocks - step * F::kStepBlocks;
    return static_cast<int>(left < F::kStepBlocks ? left : F::kStepBlocks);
  };

  float acc[kNTiles][4] = {};  // tile j: quant_mma_step.cuh's acc for tokens 8j ..
  typename F::Raw cur_a, cur_b;
  int64_t step = warp;
  if (step < num_steps) {
    const size_t off = static_cast<size_t>(step) * F::kStepBlocks * F::kBytes;
    F::load(cur_a, wa + off, valid_blocks(step), c);
    F::load(cur_b, wb + off, valid_blocks(step), c);
  }
  for (; step < num_steps; step += kWarps) {
    typename F::Raw next_a, next_b;
    const int64_t next = step + kWarps;
    if (next < num_steps) {  // in flight during this step's math
      const size_t off = static_cast<size_t>(next) * F::kStepBlocks * F::kBytes;
      F::load(next_a, wa + off, valid_blocks(next), c);
      F::load(next_b, wb + off, valid_blocks(next), c);
    }
    const int valid_chunks = valid_blocks(step) * F::kElems / 32;
    const T* xs = x + step * kStepElems;
#pragma unroll
    for (int h = 0; h < qmma::kChunks; ++h) {
      if (h >= valid_chunks) break;
      uint32_t xv[kNTiles][4];  // token 8j + g's chunk h; zero past p.rows
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        const int token = 8 * j + g;
        if (token < p.rows) {
          qmma::load_x_chunk<F::kX>(xv[j], xs + token * p.k + 32 * h, c);
        } else {
          xv[j][0] = xv[j][1] = xv[j][2] = xv[j][3] = 0;
        }
      }
      const qfrag::Chunk ka = F::template chunk<T>(cur_a, h);
      const qfrag::Chunk kb = F::template chunk<T>(cur_b, h);
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) qmma::accumulate_chunk<T, F>(acc[j], ka, kb, xv[j]);
    }
    cur_a = next_a;
    cur_b = next_b;
  }
  qmma::store_tiles<T, kWarps, kNTiles>(partial, acc, p, row0);
}

// Calls f(F{}) with the traits of w_dtype (a group format as its format
// without the permutation); false when the format has none here.
template <typename Fn>
bool dispatch_format(DType t, Fn&& f) {
  switch (without_k_perm(t)) {
    case DType::kQ4_0:
      f(qfrag::FmtQ4_0{});
      return true;
    case DType::kQ4_1:
      f(qfrag::FmtQ4_1{});
      return true;
    case DType::kQ8_0:
      f(qfrag::FmtQ8_0{});
      return true;
    case DType::kQ5_0:
      f(qfrag::FmtQ5_0{});
      return true;
    case DType::kQ5_1:
      f(qfrag::FmtQ5_1{});
      return true;
    case DType::kQ2_K:
      f(qfrag::FmtQ2K{});
      return true;
    case DType::kQ3_K:
      f(qfrag::FmtQ3K{});
      return true;
    case DType::kQ4_K:
      f(qfrag::FmtQ45K<false>{});
      return true;
    case DType::kQ5_K:
      f(qfrag::FmtQ45K<true>{});
      return true;
    case DType::kQ6_K:
      f(qfrag::FmtQ6K{});
      return true;
    case DType::kW4G32:
      f(qfrag::FmtGroup<4, 32>{});
      return true;
    case DType::kW4G64:
      f(qfrag::FmtGroup<4, 64>{});
      return true;
    case DType::kW4G128:
      f(qfrag::FmtGroup<4, 128>{});
      return true;
    case DType::kW8G32:
      f(qfrag::FmtGroup<8, 32>{});
      return true;
    case DType::kW8G64:
      f(qfrag::FmtGroup<8, 64>{});
      return true;
    case DType::kW8G128:
      f(qfrag::FmtGroup<8, 128>{});
      return true;
    default:
      return false;
  }
}

// The checks of quant_mma_gemv_supports but the row count's: dtypes, a
// format listed in quant_linear_kernels.h, alignments.
bool mma_operands_ok(const QuantGemvParams& p) {
  if (p.w_tiles) return false;  // the tile layout (w4_tiles.h): launch_w4_tile_gemv only
  const bool in_ok = p.dtype == DType::kBF16 || p.dtype == DType::kF16;
  const bool out_ok = p.out_dtype == p.dtype || p.out_dtype == DType::kF32;
  const bool bias_ok = p.bias == nullptr || p.bias_dtype == DType::kF32 ||
                       p.bias_dtype == DType::kBF16 || p.bias_dtype == DType::kF16;
  if (!in_ok || !out_ok || !bias_ok || !is_block_dtype(p.w_dtype) || has_k_perm(p.w_dtype) ||
      p.n <= 0 || p.k <= 0 || p.k % dtype_block_elems(p.w_dtype) != 0 || !is_aligned(p.x, 16))
    return false;
  int align = 0;
  if (!dispatch_format(p.w_dtype, [&](auto f) { align = decltype(f)::kAlign; })) return false;
  return is_aligned(p.w, static_cast<uintptr_t>(align));  // row bytes are multiples of align
}

}  // namespace

bool quant_mma_gemv_supports(const QuantGemvParams& p) {
  if (p.rows < 1 || p.rows > kQuantGemvMaxRows || !mma_operands_ok(p)) return false;
  // One row of q4_0 / q4_1 / q8_0 (2- and 4-byte aligned blocks, read in
  // narrow loads): the CUDA-core kernel is faster there (H200, kernel_bench
  // --quant, 8B down at T = 1: q8_0 65.7 vs 40.5 us, q4_0 38.0 vs 30.9, q4_1
  // 37.0 vs 27.2); from two rows on this one is (q8_0 down at T = 8: 67.7
  // vs 154.1 us).
  const DType f = without_k_perm(p.w_dtype);
  if (p.rows == 1 && (f == DType::kQ4_0 || f == DType::kQ4_1 || f == DType::kQ8_0)) return false;
  // q5_0 below three rows and q5_1 at one row likewise (H100, kernel_bench
  // --quant, 8B gate_up: q5_0 at T = 2 106.2 here vs 90.1 us, at T = 4 110.3
  // vs 152.0; q5_1 at T = 1 66.5 vs 63.8, at T = 2 67.8 vs 80.1): q5_0 is
  // five u16 loads per 22-byte block (quant_fragments_q5.cuh).
  if (f == DType::kQ5_0 && p.rows < 3) return false;
  return f != DType::kQ5_1 || p.rows >= 2;
}

cudaError_t launch_quant_mma_gemv(const QuantGemvParams& p, cudaStream_t stream) {
  if (!quant_mma_gemv_supports(p)) return cudaErrorInvalidValue;
  const int64_t tiles = ceil_div(p.n, kTileRows);
  if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles));
  return dispatch_half(p.dtype, [&](auto t) {
    using T = decltype(t);
    dispatch_format(p.w_dtype, [&](auto f) {
      using F = decltype(f);
      if (tiles >= kManyTiles) {
        launch_kernel(quant_mma_gemv_kernel<T, F, 4>, grid, 4 * 32, 0, stream, p);
      } else {
        launch_kernel(quant_mma_gemv_kernel<T, F, 8>, grid, 8 * 32, 0, stream, p);
      }
    });
    return cudaGetLastError();
  });
}

bool quant_mma_wide_supports(const QuantGemvParams& p) {
  return p.rows > kQuantGemvMaxRows && p.rows <= kQuantWideMaxRows && mma_operands_ok(p);
}

cudaError_t launch_quant_mma_wide(const QuantGemvParams& p, cudaStream_t stream) {
  if (!quant_mma_wide_supports(p)) return cudaErrorInvalidValue;
  const int64_t tiles = ceil_div(p.n, kTileRows);
  if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles));
  const size_t es = dtype_size(p.dtype), out_es = dtype_size(p.out_dtype);
  return dispatch_half(p.dtype, [&](auto t) {
    using T = decltype(t);
    dispatch_format(p.w_dtype, [&](auto f) {
      using F = decltype(f);
      // Passes of up to kWideTokens rows: x and out advance by their rows.
      for (int r0 = 0; r0 < p.rows; r0 += kWideTokens) {
        QuantGemvParams q = p;
        q.rows = p.rows - r0 < kWideTokens ? p.rows - r0 : kWideTokens;
        q.x = static_cast<const char*>(p.x) + static_cast<size_t>(r0 * p.k) * es;
        q.out = static_cast<char*>(p.out) + static_cast<size_t>(r0 * p.n) * out_es;
        if (q.rows > 16) {
          launch_kernel(quant_mma_wide_kernel<T, F, kWideWarps, 4>, grid, kWideWarps * 32, 0,
                        stream, q);
        } else {
          launch_kernel(quant_mma_wide_kernel<T, F, kWideWarps, 2>, grid, kWideWarps * 32, 0,
                        stream, q);
        }
      }
    });
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
