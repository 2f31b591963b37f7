// Elementwise epilogues: SwiGLU / GeGLU (silu_mul, gelu_tanh_mul), a bias
// add for outputs that the cuBLASLt epilogue does not cover (f32 logits,
// unaligned bias), and the in-place scale and soft-capping (Gemma).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

enum class GluActivation { kSilu, kGeluTanh };

struct SiluMulParams {
  GluActivation act = GluActivation::kSilu;
  DType dtype = DType::kBF16;
  const void* gate_up = nullptr;  // [num_rows, 2 * inter]: gate columns, then up columns
  void* out = nullptr;            // [num_rows, inter]
  int64_t num_rows = 0;
  int64_t inter = 0;
  // Optional (both or neither): out's per-token FP8 codes [num_rows, inter]
  // and scales [num_rows] f32, computed from out as rounded (core/fp8_quant.h
  // dynamic rules): bit-equal to launch_fp8_quantize of out.
  uint8_t* codes = nullptr;
  float* scales = nullptr;
};

// out = round(round(act(gate)) * up), act in f32 (like torch in 16-bit):
// silu, or gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
// With codes set, the kernel also quantises each row (silu_mul_fp8), a row
// split over a thread-block cluster of up to 8 CTAs when rows are few.
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

struct ScaleParams {
  DType dtype = DType::kBF16;  // f32, bf16 or f16
  void* x = nullptr;           // [n], in place
  int64_t n = 0;
  float scale = 1.0f;    // when softcap == 0: x = round(x * scale)
  float softcap = 0.0f;  // > 0: x = round(softcap * tanh(x / softcap))
};

// x = round(f(x)) in f32 (see ScaleParams).
cudaError_t launch_scale(const ScaleParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
