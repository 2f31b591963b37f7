// Rotary position embedding, rotate-half (GPT-NeoX) pairing, in place, over
// the first rotary_dim dims of each head (all of them, or a partial rotary
// embedding's share).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

struct RopeParams {
  DType dtype = DType::kBF16;
  void* qkv = nullptr;           // [num_tokens, row_width]; heads [0, num_heads) rotated
  int64_t num_tokens = 0;
  int64_t row_width = 0;
  int num_heads = 0;             // q heads + k heads (they are adjacent in the row)
  int head_dim = 0;
  int rotary_dim = 0;            // even, in (0, head_dim]; dims [rotary_dim, head_dim) untouched
  const int32_t* positions = nullptr;  // [num_tokens]
  const float* cos_sin = nullptr;      // [num_positions, rotary_dim]: cos(p f_i) i < R/2, then sin
  int64_t num_positions = 0;
};

// x[i], x[i + R/2] <- x1 cos - x2 sin, x2 cos + x1 sin for i < R/2
// (R = rotary_dim), computed in f32
// (each product and sum rounded, no FMA: head_ops.cuh) and rounded once to T. A token whose
// position is outside [0, num_positions) is left unchanged. An odd
// rotary_dim or one outside (0, head_dim]: cudaErrorInvalidValue.
cudaError_t launch_rope(const RopeParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
