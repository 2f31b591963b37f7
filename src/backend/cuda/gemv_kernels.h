// Skinny products for decode: out = x @ w^T (+ bias) when x has at most
// kGemvMaxRows rows. Such a product is a pure weight stream, so a
// warp-per-output-row kernel that keeps many 16-byte loads in flight gets
// closer to the memory bandwidth than a GEMM tiling.
//
// Measured on an H200 (Llama-3.1-8B shapes, bench/NOTES.md v2): one row beats
// cuBLASLt by 0-14% (o_proj 11.1 vs 12.7 us, lm_head 234 vs 249 us); at four
// rows the CUDA-core math (x conversion and FMAs per weight) is the limit and
// cuBLASLt's tensor-core kernel is 1.2-1.5x faster, so only one row is routed
// here. Alone, cuBLASLt is ~1 us faster on qkv, gate_up and down; but a
// variant that timed both per shape and kept the faster made W1 slower (TPOT
// 4.66 vs 4.57-4.60 ms): in a decode graph this kernel takes part in PDL
// (kernel_launch.cuh) and cuBLASLt's do not. So every one-row product of a
// supported shape comes here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

constexpr int kGemvMaxRows = 1;

struct GemvParams {
  DType dtype = DType::kBF16;       // x and w: bf16 or f16
  const void* x = nullptr;          // [rows, k], 16-byte aligned
  const void* w = nullptr;          // [n, k], 16-byte aligned
  const void* bias = nullptr;       // [n] or null
  DType bias_dtype = DType::kBF16;  // f32, bf16 or f16
  void* out = nullptr;              // [rows, n]
  DType out_dtype = DType::kBF16;   // dtype or f32
  int rows = 0;                     // 1 .. kGemvMaxRows
  int64_t n = 0;
  int64_t k = 0;                    // multiple of 8
};

// True when launch_gemv handles p (rows, dtypes, k % 8, alignments).
bool gemv_supports(const GemvParams& p);

// out[r, j] = round(sum_i x[r, i] * w[j, i] + bias[j]), f32 accumulation.
cudaError_t launch_gemv(const GemvParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
