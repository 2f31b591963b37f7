// Linear layers whose weight stays in quantization blocks (a block dtype of
// core/dtype.h: GGUF's Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, bytes as in
// the file, or the group formats w4g32..w8g128 AWQ / GPTQ are repacked
// into): w [n, k] is n rows of k / block elements' blocks.
//
//  - launch_quant_staged_gemv: decode, 1..kQuantGemvMaxRows rows of x, for
//    q8_0, q4_0 and q4_1 (2-byte aligned blocks): the weight is copied into
//    shared memory in 16-byte cp.async chunks, double-buffered, and read
//    from there into the tensor-core step of launch_quant_mma_gemv
//    (quant_staged_gemv.cu).
//  - launch_quant_mma_gemv: decode, 1..kQuantGemvMaxRows rows of x, for
//    every GGUF format (q4_0, q4_1, q5_0, q5_1, q8_0, q2_K..q6_K) and the
//    group formats: the integer quants are mma A operands, x the B operand,
//    scales applied in f32 per 16 / 32 elements (quant_mma_gemv.cu).
//  - launch_quant_mma_wide: kQuantGemvMaxRows + 1 .. kQuantWideMaxRows rows
//    of x, the formats of launch_quant_mma_gemv: its kernel's layout, each
//    decoded weight fragment multiplied with up to 4 n8 tiles of x (32
//    rows a launch; quant_mma_gemv.cu).
//  - launch_quant_tiled_gemm: kQuantTiledMinRows rows of x and more (any
//    count), for q4_0, q4_1, q8_0, q4_K, q5_K, q6_K and the group formats
//    without _perm: a tiled tensor-core GEMM (64 features x 64 tokens a CTA)
//    with the weight's blocks and x staged in shared memory by cp.async
//    and decoded there into mma A fragments (quant_tiled_gemm.cu).
//  - launch_quant_gemv (GGUF formats the above does not take: misaligned
//    weights, one row of q4_0 / q4_1 / q5_1 / q8_0, up to two of q5_0) /
//    launch_group_gemv: the
//    same product on the CUDA cores (all formats; what the formats above
//    used before, kept for the rest and for A/B runs): a weight stream
//    dequantized in f32 registers (quant_blocks.cuh) and dotted with every
//    x row, f32 accumulation.
//  - 4-bit group weights repacked at load into the tile layout (w4_tiles.h,
//    QuantGemvParams::w_tiles): launch_w4_tile_gemv (1..32 rows) and the
//    dequantization below; the kernels above refuse that layout.
//  - launch_dequantize_blocks: rows [n0, n0 + num_rows) of w to bf16 / f16
//    (where the above do not apply: the
//    backend dequantizes a weight in chunks into a scratch buffer and runs
//    the cuBLASLt GEMM on each chunk).
// All are graph-capturable: no allocation, no host synchronization.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

constexpr int kQuantGemvMaxRows = 8;
constexpr int kQuantWideMaxRows = 64;
// linear() routes only up to this many rows to the wide kernel: each of its
// CTAs re-reads x for its K range, so it loses to dequantize + cuBLASLt above
// 32 rows (H100, 8B shapes, wide / dequant time at T = 16 / 32 / 64 over
// q4_0, q8_0, q4_K, q6_K, w4g128: 0.20-0.89 / 0.47-1.21 / 0.89-2.69,
// bench/results/2026-11-27-h100x2-session25.md).
constexpr int kQuantWideRouteMaxRows = 32;
static_assert(kQuantWideRouteMaxRows <= kQuantWideMaxRows);

// linear() routes kQuantTiledMinRows rows and more to the tiled GEMM (the
// formats it takes): from here on the wide kernel's per-CTA re-read of x
// loses to dequantize + cuBLASLt, which the tiled kernel replaces.
constexpr int kQuantTiledMinRows = kQuantWideRouteMaxRows + 1;
// ... up to this many, and only for weights of at least kQuantTiledRouteMinN
// output features (quant_tiled_route). Measured on an H100 (kernel_bench
// --quant, bench/results/2026-11-28-h100-session28.md), tiled / dequantize +
// cuBLASLt time at 64 rows: gate_up 28672x4096 and lm_head 128256x4096
// 0.38-0.64 over q4_K, q6_K, q8_0, w4g128; qkv 6144x4096, o_proj 4096x4096
// and down 4096x14336 0.74-1.93 (mostly slower: 64 or 96 CTAs of 64 features
// do not fill the GPU); at 128 rows gate_up / lm_head 0.66-1.02, at 256 rows
// 1.1-1.8 (the kernel's mma.sync loop reaches ~150 TFLOP/s).
constexpr int kQuantTiledRouteMaxRows = 64;
constexpr int64_t kQuantTiledRouteMinN = 16384;
// Whether linear() takes the tiled GEMM for `rows` rows of x and an n x k
// weight of a format it supports (quant_tiled_gemm_supports).
constexpr bool quant_tiled_route(int64_t rows, int64_t n) {
  return rows >= kQuantTiledMinRows && rows <= kQuantTiledRouteMaxRows &&
         n >= kQuantTiledRouteMinN;
}

struct QuantGemvParams {
  DType dtype = DType::kBF16;       // x: bf16 or f16
  DType w_dtype = DType::kQ4_K;     // a block dtype
  const void* x = nullptr;          // [rows, k], 16-byte aligned
  const void* w = nullptr;          // [n, k] in blocks
  const void* bias = nullptr;       // [n] or null
  DType bias_dtype = DType::kBF16;  // f32, bf16 or f16
  void* out = nullptr;              // [rows, n]
  DType out_dtype = DType::kBF16;   // dtype or f32
  int rows = 0;                     // 1 .. kQuantGemvMaxRows (wide: .. kQuantWideMaxRows; tiled: any)
  int64_t n = 0;
  int64_t k = 0;  // a multiple of the block's elements
  // w is in the 4-bit tile layout (w4_tiles.h): only launch_w4_tile_gemv
  // reads it; every other kernel's supports() refuses it.
  bool w_tiles = false;
};

// True when launch_quant_staged_gemv handles p: q8_0, q4_0 or q4_1, 1..8
// rows, w 2-byte aligned, x 16-byte aligned.
bool quant_staged_gemv_supports(const QuantGemvParams& p);

// How the staged kernel schedules its copies: kPipelined (the default)
// picks warps and buffers per shape (quant_staged_gemv_config) and runs
// whole steps without a branch per copy, x chunk or block; kDoubleBuffered is the first
// version (8 warps a CTA below 1024 tiles, else 4; two buffers a warp; a
// block at a time), kept for A/B timing (CudaBackend::QuantDecode::
// kStagedV1). Each is deterministic; the two differ in f32 summation order
// where their warp counts differ (each warp sums its own steps of K).
enum class StagedPlan { kPipelined, kDoubleBuffered };

// One launch's kernel: warps a CTA (each owns every warps-th 256-element
// step of K), stages (buffers a warp: stages - 1 steps' copies in flight
// while it computes one), whole_steps (full steps without a branch per
// block).
struct StagedConfig {
  int warps = 0;
  int stages = 0;
  bool whole_steps = false;
};

// The configuration launch_quant_staged_gemv(p, ..., plan) runs (p.n, p.k
// only): kPipelined: 4 warps x 2 stages from 1024 tiles (n >= 16384) on,
// else 4 x 3 for K <= 8192, else 8 x 2, all whole_steps; kDoubleBuffered:
// 4 x 2 from 1024 tiles on, else 8 x 2, a block at a time.
StagedConfig quant_staged_gemv_config(const QuantGemvParams& p, StagedPlan plan);

// out[r, j] = round(sum_i x[r, i] * dequant(w)[j, i] + bias[j]), f32
// accumulation in a fixed order (that of launch_quant_mma_gemv). Copies
// start 16-byte aligned: when w is not, up to 14 bytes before w are read
// (the 16-byte granule holding w's first byte: never another page).
cudaError_t launch_quant_staged_gemv(const QuantGemvParams& p, cudaStream_t stream,
                                     StagedPlan plan = StagedPlan::kPipelined);

// Lets the staged kernels use their shared memory (over 48 KiB for q8_0);
// called once per device before the first launch (CudaBackend::init).
cudaError_t init_quant_staged_gemv();

// True when launch_quant_mma_gemv handles p: a format listed above (group
// formats without _perm), w aligned to the format's loads (2 bytes for
// q4_0 / q5_0 / q8_0 / q3_K / q6_K, 8 for q5_1, 16 for q4_K / q5_K, else 4),
// x 16-byte aligned; q4_0, q4_1, q5_1 and q8_0 from 2 rows on, q5_0 from 3
// (fewer rows are faster on the CUDA-core kernel).
bool quant_mma_gemv_supports(const QuantGemvParams& p);

// out[r, j] = round(sum_i x[r, i] * dequant(w)[j, i] + bias[j]), f32
// accumulation in a fixed order.
cudaError_t launch_quant_mma_gemv(const QuantGemvParams& p, cudaStream_t stream);

// True when launch_quant_mma_wide handles p: the operands
// quant_mma_gemv_supports takes, with kQuantGemvMaxRows + 1 ..
// kQuantWideMaxRows rows (every listed format).
bool quant_mma_wide_supports(const QuantGemvParams& p);

// out[r, j] = round(sum_i x[r, i] * dequant(w)[j, i] + bias[j]), f32
// accumulation in a fixed order (per 32 rows of x, that of
// launch_quant_mma_gemv); one launch per 32 rows of x.
cudaError_t launch_quant_mma_wide(const QuantGemvParams& p, cudaStream_t stream);

// True when launch_quant_tiled_gemm handles p: q4_0, q4_1, q8_0, q4_K,
// q5_K, q6_K or a group format without _perm, k a multiple of 256, w
// aligned to the format's loads (as quant_mma_gemv_supports), x 16-byte
// aligned, any rows >= 1.
bool quant_tiled_gemm_supports(const QuantGemvParams& p);

// out[r, j] = round(sum_i x[r, i] * dequant(w)[j, i] + bias[j]), f32
// accumulation in K order (that of launch_quant_mma_gemv's per-warp sums);
// one launch for every row of x. As the staged kernel, with w not 16-byte
// aligned up to 14 bytes before w are read (never another page).
cudaError_t launch_quant_tiled_gemm(const QuantGemvParams& p, cudaStream_t stream);

// Lets the tiled kernels use their shared memory (94..112 KiB); called once
// per device before the first launch (CudaBackend::init).
cudaError_t init_quant_tiled_gemm();

// True when launch_quant_gemv handles p (the GGUF formats).
bool quant_gemv_supports(const QuantGemvParams& p);

// out[r, j] = round(sum_i x[r, i] * dequant(w)[j, i] + bias[j]).
cudaError_t launch_quant_gemv(const QuantGemvParams& p, cudaStream_t stream);

// The same product for a group format without K permutation (w4g32 ..
// w8g128; a _perm weight's x is gathered into its stored column order first
// and passed with the format without _perm): group_gemv.cu streams 4 rows
// per warp in 4-byte words. w must be 4-byte aligned.
bool group_gemv_supports(const QuantGemvParams& p);
cudaError_t launch_group_gemv(const QuantGemvParams& p, cudaStream_t stream);

struct DequantizeBlocksParams {
  DType w_dtype = DType::kQ4_K;  // a block dtype
  const void* w = nullptr;       // [n, k] in blocks
  int64_t k = 0;                 // a multiple of the block's elements
  int64_t first_row = 0;         // n0
  int64_t num_rows = 0;
  DType out_dtype = DType::kBF16;  // bf16 or f16
  void* out = nullptr;             // [num_rows, k], 16-byte aligned
  // [k]: a _perm group format's permutation of K (Tensor::k_perm()), null
  // for every other format: stored column i is written to column k_perm[i].
  const int32_t* k_perm = nullptr;
  // w is in the 4-bit tile layout (w4_tiles.h; launch_w4_tile_dequantize).
  bool w_tiles = false;
};

// out[r, :] = round(dequant(w)[first_row + r, :]) for r < num_rows, in
// logical column order (either layout of a 4-bit group weight: w_tiles).
cudaError_t launch_dequantize_blocks(const DequantizeBlocksParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
