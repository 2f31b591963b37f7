// RMSNorm family: rms_norm, fused add_rms_norm, per-head qk_norm (Qwen3).
//
// Rounding points (like Hugging Face's LlamaRMSNorm / Qwen3RMSNorm in 16-bit):
//  - add_rms_norm: residual = round(residual + x) is stored, and the norm
//    reads that rounded value;
//  - inv = 1 / sqrt(mean(x^2) + eps) in f32 (IEEE sqrt and division);
//  - y = round(x * inv) to the compute dtype, then out = round(y * w).
// The CPU reference runs all of this in f32 without rounding; the difference
// is within the 16-bit tolerance of the kernel tests.
// With codes / scales set, the kernel also quantises its output row for an
// FP8 linear (backend.h rms_norm_fp8 / add_rms_norm_fp8).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

struct RmsNormParams {
  DType dtype = DType::kBF16;  // bf16 or f16 for every tensor
  const void* x = nullptr;     // [num_rows, hidden]
  void* residual = nullptr;    // [num_rows, hidden] or null; set: residual += x first
  const void* weight = nullptr;  // [hidden]
  void* out = nullptr;         // [num_rows, hidden]; may alias x (not residual)
  int64_t num_rows = 0;
  int64_t hidden = 0;
  float eps = 1e-6f;
  // Optional (both or neither): out's per-token FP8 codes [num_rows, hidden]
  // and scales [num_rows] f32, computed from out as rounded (core/fp8_quant.h
  // dynamic rules): bit-equal to launch_fp8_quantize of out (fp8_quant.cuh).
  uint8_t* codes = nullptr;
  float* scales = nullptr;
};

cudaError_t launch_rms_norm(const RmsNormParams& p, cudaStream_t stream);

struct QkNormParams {
  DType dtype = DType::kBF16;
  void* qkv = nullptr;         // [num_tokens, row_width], normalised in place
  int64_t num_tokens = 0;
  int64_t row_width = 0;
  int num_q_heads = 0;         // heads [0, Hq) use q_weight, [Hq, Hq + Hkv) use k_weight
  int num_kv_heads = 0;
  int head_dim = 0;            // <= 256
  const void* q_weight = nullptr;  // [head_dim]
  const void* k_weight = nullptr;  // [head_dim]
  float eps = 1e-6f;
};

cudaError_t launch_qk_norm(const QkNormParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
