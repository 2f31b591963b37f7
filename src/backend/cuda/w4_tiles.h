// The tile layout of a 4-bit group-format weight on the device (w4g32,
// w4g64, w4g128 and their _perm forms; core/dtype.h), made once at load by
// CudaBackend::prepare_block_weight (launch_w4_tile_repack) so the decode
// kernel (w4_tile_gemv.cu) streams it in 16-byte loads that are its mma A
// fragments as they are. Only for N % 16 == 0 and K % 64 == 0
// (w4_tiles_apply); other weights keep the row-of-blocks layout.
//
// Byte count per 16-row tile unchanged: tile t (rows 16t .. 16t + 15) is the
// 16 * row_bytes bytes at t * 16 * row_bytes (row_bytes = K / G * (4 + G / 2)),
// so a view of whole tiles (fused q/k/v parts, gate/up offsets) stays valid,
// and a _perm format's permutation stays where it was (after the N rows).
// A tile is:
//  - the quant plane, K / 64 chunks of 512 bytes: chunk j's lane l = 4g + c
//    (g = l / 4, c = l % 4) owns the 16 bytes at j * 512 + 16 l, four u32
//    words, word i = 2h + e (k16 step i of the chunk) holding 8 nibbles:
//      nibble p (bits 4p .. 4p + 3), p = 0..7: row (g + 8 * (p & 1)),
//      column 64 j + 32 h + 8 c + 4 e + 2 * ((p >> 1) & 1) + (p >> 2)
//    i.e. the m16n8k16 A fragment (a0 .. a3, each a pair) of rows g, g + 8,
//    mma column pairs (2c, 2c + 1) and (2c + 8, 2c + 9) standing for the
//    tile columns 32 h + 8 c + 4 e + (0, 1) and (2, 3): nibbles (p, p + 4)
//    are fragment register p's low and high element. A k16 step stays inside
//    one 32-column half of the chunk, so inside one group (G >= 32);
//  - the scale plane, K / G groups of 64 bytes: group q's bytes
//    q * 64 + 8 g .. + 7 are (s f16, z u16) of row g, then of row g + 8.
// Element (r, k) is (q - z) * s as in the row-of-blocks layout.
//
// The backend keeps the weights it repacked (start, bytes) until they are
// deallocated; a linear() weight inside one is read in this layout
// (QuantGemvParams::w_tiles, DequantizeBlocksParams::w_tiles), and every
// other block kernel's supports() refuses it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/quant_linear_kernels.h"
#include "core/dtype.h"

namespace pagoda::cuda {

constexpr int64_t kW4TileRows = 16;
constexpr int64_t kW4TileChunkElems = 64;
constexpr int64_t kW4TileChunkBytes = 512;
constexpr int64_t kW4TileGroupBytes = 64;
// Rows of x the tile kernel takes a launch (up to 4 n8 tiles).
constexpr int kW4TileMaxRows = 32;

// True when a weight [n, k] of `t` is repacked into the tile layout: a
// 4-bit group format (with or without _perm), n % 16 == 0, k % 64 == 0.
constexpr bool w4_tiles_apply(DType t, int64_t n, int64_t k) {
  const DType f = without_k_perm(t);
  return (f == DType::kW4G32 || f == DType::kW4G64 || f == DType::kW4G128) && n > 0 && k > 0 &&
         n % kW4TileRows == 0 && k % kW4TileChunkElems == 0 && k % dtype_block_elems(t) == 0;
}

// Bytes of one 16-row tile of a w4_tiles_apply weight [*, k] of `t`.
constexpr size_t w4_tile_bytes(DType t, int64_t k) {
  return static_cast<size_t>(kW4TileRows) * dtype_nbytes(t, k);
}

struct W4TileRepackParams {
  DType w_dtype = DType::kW4G128;  // w4g32 / w4g64 / w4g128 (_perm: as without)
  const void* src = nullptr;       // [num_tiles * 16, k] row-of-blocks, 4-byte aligned
  void* dst = nullptr;             // the same tiles in the tile layout, 16-byte aligned
  int64_t num_tiles = 0;
  int64_t k = 0;
};

// dst = the tile layout of src (no overlap). Graph-capturable.
cudaError_t launch_w4_tile_repack(const W4TileRepackParams& p, cudaStream_t stream);

// True when launch_w4_tile_gemv handles p: p.w_tiles, a 4-bit group format
// without _perm (x gathered), 1 .. kW4TileMaxRows rows, n % 16 == 0,
// k % 64 == 0, w and x 16-byte aligned, dtypes as launch_quant_mma_gemv.
bool w4_tile_gemv_supports(const QuantGemvParams& p);

// The decode kernels: kV1 (w4_tile_gemv.cu: a CTA a tile, any T up to
// kW4TileMaxRows) and kV2 (w4_tile_gemv_v2.cu: persistent CTAs, x kept in
// registers or shared memory, the zero point folded; w4_tile_gemv_v2_supports,
// else kV1).
enum class W4TileKernel { kV1, kV2 };

// The v2 kernel takes T <= 8 up to K = kW4TileV2MaxK (16 warps of 256
// columns, x in registers) and T <= kW4TileV2LongMaxRows up to
// kW4TileV2LongMaxK (x staged in shared memory: T (K + 32) 2 bytes + 16 KiB,
// 144 KiB at the limits).
constexpr int64_t kW4TileV2MaxK = 4096;
constexpr int kW4TileV2LongMaxRows = 4;
constexpr int64_t kW4TileV2LongMaxK = 16384;

// PAGODA_W4_TILE_KERNEL=v1 or v2 in the environment (read once); v2 when
// unset or anything else.
W4TileKernel w4_tile_kernel_from_env();

// out[r, j] = round(sum_i x[r, i] * dequant(w)[j, i] + bias[j]), w in the
// tile layout, with `kernel` where it applies (kV2: w4_tile_gemv_v2_supports)
// else kV1; the one-argument form with w4_tile_kernel_from_env(). Each
// kernel sums in f32 in a fixed order (deterministic); v1 and v2 differ in
// that order.
cudaError_t launch_w4_tile_gemv(const QuantGemvParams& p, W4TileKernel kernel,
                                cudaStream_t stream);
cudaError_t launch_w4_tile_gemv(const QuantGemvParams& p, cudaStream_t stream);

// True when the v2 kernel takes p: w4_tile_gemv_supports and rows <= 8,
// k <= kW4TileV2MaxK or rows <= kW4TileV2LongMaxRows, k <= kW4TileV2LongMaxK.
bool w4_tile_gemv_v2_supports(const QuantGemvParams& p);

// The v2 kernel alone (cudaErrorInvalidValue where it does not apply), and
// the CTAs it launches for p (0 where it does not apply): with rounds =
// ceil(tiles / m), ceil(tiles / rounds) CTAs (each takes rounds or rounds - 1
// tiles).
// m = w4_tile_gemv_v2_max_ctas(p) = SMs x CTAs per SM (p.k, p.dtype,
// p.w_dtype and for k > kW4TileV2MaxK p.rows matter), 0 where v2 does not
// apply.
cudaError_t launch_w4_tile_gemv_v2(const QuantGemvParams& p, cudaStream_t stream);
int64_t w4_tile_gemv_v2_grid(const QuantGemvParams& p);
int64_t w4_tile_gemv_v2_max_ctas(const QuantGemvParams& p);

// launch_dequantize_blocks for a weight in the tile layout (p.w_tiles):
// p.first_row and p.num_rows need not be whole tiles.
cudaError_t launch_w4_tile_dequantize(const DequantizeBlocksParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
