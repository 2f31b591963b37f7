// Elementwise epilogues: SwiGLU (silu_mul) and a bias add for outputs that
// the cuBLASLt epilogue does not cover (f32 logits, unaligned bias).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

struct SiluMulParams {
  DType dtype = DType::kBF16;
  const void* gate_up = nullptr;  // [num_rows, 2 * inter]: gate columns, then up columns
  void* out = nullptr;            // [num_rows, inter]
  int64_t num_rows = 0;
  int64_t inter = 0;
};

// out = round(round(silu(gate)) * up), silu in f32 (like torch in 16-bit).
cudaError_t launch_silu_mul(const SiluMulParams& p, cudaStream_t stream);

struct BiasAddParams {
  DType out_dtype = DType::kF32;   // f32, bf16 or f16
  void* out = nullptr;             // [num_rows, num_cols], in place
  DType bias_dtype = DType::kBF16; // f32, bf16 or f16
  const void* bias = nullptr;      // [num_cols]
  int64_t num_rows = 0;
  int64_t num_cols = 0;
};

// out[r, c] = round(out[r, c] + bias[c]) in f32.
cudaError_t launch_bias_add(const BiasAddParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
