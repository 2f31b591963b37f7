// Per-element device math shared by the unfused kernels (rms_norm, qk_norm,
// rope, silu_mul / gelu_tanh_mul) and the fused kernels that must match them
// bit for bit: each is one inline function, so every caller rounds the same
// way. Included only by .cu files of backend/cuda.
#pragma once

#include "backend/cuda/activation_kernels.h"
#include "backend/cuda/cuda_common.cuh"

namespace pagoda::cuda {

// RMSNorm's output element: T(T(x * inv) * w).
template <typename T>
__device__ __forceinline__ T norm_apply(float x, float inv, T w) {
  const T y = from_float<T>(x * inv);
  return from_float<T>(to_float(y) * to_float(w));
}

// A warp's per-head RMSNorm factor 1 / sqrt(mean(x^2) + eps), head_dim <= 256:
// lane l holds elements d = l + 32 k (k < 8) in vals[k], zero past head_dim.
// Every lane gets the same value.
__device__ __forceinline__ float head_rms_inv(const float (&vals)[8], int head_dim, float eps) {
  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) sum_sq += vals[k] * vals[k];
  sum_sq = warp_sum(sum_sq);
  return 1.0f / sqrtf(sum_sq / static_cast<float>(head_dim) + eps);
}

// Rotate-half rotary embedding of the pair (x1, x2) = (x[i], x[i + D/2]):
// y1 = x1 c - x2 s, y2 = x2 c + x1 s, each product and sum rounded in f32
// (no fused multiply-add, so the result does not depend on the compiler's
// contraction choices).
__device__ __forceinline__ float rope_first(float x1, float x2, float c, float s) {
  return __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
}
__device__ __forceinline__ float rope_second(float x1, float x2, float c, float s) {
  return __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

// One element of a gated activation: T(T(act(g)) * u), act in f32.
template <typename T, GluActivation kAct>
__device__ __forceinline__ T glu_one(T g, T u) {
  const float gf = to_float(g);
  float a;
  if constexpr (kAct == GluActivation::kSilu) {
    a = gf / (1.0f + expf(-gf));
  } else {
    constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
    a = 0.5f * gf * (1.0f + tanhf(kBeta * (gf + 0.044715f * (gf * gf * gf))));
  }
  return from_float<T>(to_float(from_float<T>(a)) * to_float(u));
}

}  // namespace pagoda::cuda
