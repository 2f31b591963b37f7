// Block-format weight rows to bf16 / f16 (quant_linear_kernels.h): one thread
// per 32-element unit reads its block from global memory, dequantizes the
// unit in registers (quant_blocks.cuh) and writes 64 bytes as four 16-byte
// stores.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/quant_blocks.cuh"
#include "backend/cuda/quant_linear_kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T, DType F>
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
  if (!is_block_dtype(p.w_dtype) || p.k <= 0 || p.k % dtype_block_elems(p.w_dtype) != 0 ||
      p.num_rows < 0 || p.first_row < 0 || !is_aligned(p.out, 16) || !is_aligned(p.w, 2))
    return cudaErrorInvalidValue;
  if (p.num_rows == 0) return cudaSuccess;
  const int64_t blocks = ceil_div(p.num_rows * (p.k / 32), kThreads);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks));
  return dispatch_half(p.out_dtype, [&](auto t) {
    return dispatch_block_dtype(p.w_dtype, [&](auto f) {
      launch_kernel(dequantize_blocks_kernel<decltype(t), decltype(f)::value>, grid, kThreads, 0,
                    stream, p);
      return cudaGetLastError();
    });
  });
}

}  // namespace pagoda::cuda
