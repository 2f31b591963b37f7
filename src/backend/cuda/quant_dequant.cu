// Block-format weight rows to bf16 / f16 (quant_linear_kernels.h): one thread
// per 32-element unit reads its block from global memory, dequantizes the
// unit in registers (quant_blocks.cuh) and writes 64 bytes as four 16-byte
// stores (a _perm group format: 32 scalar stores to the permuted columns,
// so out is the weight in its logical column order). A weight in the 4-bit
// tile layout goes to launch_w4_tile_dequantize (w4_tile_repack.cu).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/quant_blocks.cuh"
#include "backend/cuda/quant_linear_kernels.h"
#include "backend/cuda/w4_tiles.h"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 256;

// kPerm: stored column c goes to column p.k_perm[c] of out (scalar stores).
template <typename T, DType F, bool kPerm>
__global__ void __launch_bounds__(kThreads) dequantize_blocks_kernel(DequantizeBlocksParams p) {
  using Fmt = BlockFormat<F>;
  pdl_enter();
  const int64_t units_per_row = p.k / 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= p.num_rows * units_per_row) return;
  const int64_t r = i / units_per_row, unit = i % units_per_row;
  const size_t row_bytes = static_cast<size_t>(p.k / Fmt::kElems) * Fmt::kBytes;
  const uint8_t* block = static_cast<const uint8_t*>(p.w) +
                         static_cast<size_t>(p.first_row + r) * row_bytes +
                         static_cast<size_t>(unit / Fmt::kUnits) * Fmt::kBytes;
  float wf[32];
  dequant_unit<F>(block, static_cast<int>(unit % Fmt::kUnits), wf);
  if constexpr (kPerm) {
    T* out = static_cast<T*>(p.out) + r * p.k;
#pragma unroll
    for (int e = 0; e < 32; ++e) out[__ldg(p.k_perm + unit * 32 + e)] = from_float<T>(wf[e]);
    return;
  }
  T* out = static_cast<T*>(p.out) + r * p.k + unit * 32;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    Vec<T, 8> v;
#pragma unroll
    for (int e = 0; e < 8; ++e) v.v[e] = from_float<T>(wf[8 * c + e]);
    store_vec(out + 8 * c, v);
  }
}

}  // namespace

cudaError_t launch_dequantize_blocks(const DequantizeBlocksParams& p, cudaStream_t stream) {
  if (p.w_tiles) return launch_w4_tile_dequantize(p, stream);
  if (!is_block_dtype(p.w_dtype) || p.k <= 0 || p.k % dtype_block_elems(p.w_dtype) != 0 ||
      p.num_rows < 0 || p.first_row < 0 || !is_aligned(p.out, 16) ||
      !is_aligned(p.w, is_group_dtype(p.w_dtype) ? 4 : 2) ||
      has_k_perm(p.w_dtype) != (p.k_perm != nullptr))
    return cudaErrorInvalidValue;
  if (p.num_rows == 0) return cudaSuccess;
  const int64_t blocks = ceil_div(p.num_rows * (p.k / 32), kThreads);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks));
  return dispatch_half(p.out_dtype, [&](auto t) {
    return dispatch_block_dtype(p.w_dtype, [&](auto f) {
      using T = decltype(t);
      constexpr DType F = decltype(f)::value;
      if constexpr (is_group_dtype(F)) {
        if (p.k_perm != nullptr) {
          launch_kernel(dequantize_blocks_kernel<T, F, true>, grid, kThreads, 0, stream, p);
          return cudaGetLastError();
        }
      }
      launch_kernel(dequantize_blocks_kernel<T, F, false>, grid, kThreads, 0, stream, p);
      return cudaGetLastError();
    });
  });
}

}  // namespace pagoda::cuda
