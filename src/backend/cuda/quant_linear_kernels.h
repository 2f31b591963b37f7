// Linear layers whose weight stays in ggml quantization blocks (a block
// dtype of core/dtype.h: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K), bytes as
// in the GGUF file: w [n, k] is n rows of k / block elements' blocks.
//
//  - launch_quant_gemv: decode, 1..kQuantGemvMaxRows rows of x. A weight
//    stream: one warp per output feature copies its row's blocks through
//    shared memory with 16-byte loads, then each lane dequantizes 32-element
//    units in registers (quant_blocks.cuh) and dots them with every x row,
//    f32 accumulation.
//  - launch_dequantize_blocks: rows [n0, n0 + num_rows) of w to bf16 / f16
//    (the larger-batch path: the backend dequantizes a weight in chunks into
//    a scratch buffer and runs the cuBLASLt GEMM on each chunk).
// Both are graph-capturable: no allocation, no host synchronization.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

constexpr int kQuantGemvMaxRows = 8;

struct QuantGemvParams {
  DType dtype = DType::kBF16;       // x: bf16 or f16
  DType w_dtype = DType::kQ4_K;     // a block dtype
  const void* x = nullptr;          // [rows, k], 16-byte aligned
  const void* w = nullptr;          // [n, k] in blocks
  const void* bias = nullptr;       // [n] or null
  DType bias_dtype = DType::kBF16;  // f32, bf16 or f16
  void* out = nullptr;              // [rows, n]
  DType out_dtype = DType::kBF16;   // dtype or f32
  int rows = 0;                     // 1 .. kQuantGemvMaxRows
  int64_t n = 0;
  int64_t k = 0;  // a multiple of the block's elements
};

// True when launch_quant_gemv handles p.
bool quant_gemv_supports(const QuantGemvParams& p);

// out[r, j] = round(sum_i x[r, i] * dequant(w)[j, i] + bias[j]).
cudaError_t launch_quant_gemv(const QuantGemvParams& p, cudaStream_t stream);

struct DequantizeBlocksParams {
  DType w_dtype = DType::kQ4_K;  // a block dtype
  const void* w = nullptr;       // [n, k] in blocks
  int64_t k = 0;                 // a multiple of the block's elements
  int64_t first_row = 0;         // n0
  int64_t num_rows = 0;
  DType out_dtype = DType::kBF16;  // bf16 or f16
  void* out = nullptr;             // [num_rows, k], 16-byte aligned
};

// out[r, :] = round(dequant(w)[first_row + r, :]) for r < num_rows.
cudaError_t launch_dequantize_blocks(const DequantizeBlocksParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
