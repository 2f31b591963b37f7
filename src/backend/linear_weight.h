// The weight of one linear layer, out = x @ w^T (+ bias): a Tensor [N, K]
// (rows = output features) in the compute dtype or a GGUF block dtype
// (core/dtype.h), or an FP8 W8A8 weight that carries its scales.
//
// FP8 (dtype kF8E4M3): the tensor holds the e4m3 codes w_q [N, K] and
//  - block == 0: weight_scale [N] f32, row n's scale (a per-tensor scale is
//    repeated on its rows at load; fused q/k/v or gate/up parts keep their
//    own scales on their rows);
//  - block == B > 0 (block-wise, B = 128 in every checkpoint seen):
//    weight_scale [ceil(N / B), ceil(K / B)] f32, the scale of the block of
//    rows [nb B, nb B + B) and columns [kb B, kb B + B) (weight_scale_inv).
// The activations x [T, K] are quantised at every call (core/fp8_quant.h):
//  - input_scale [1] f32 (static, block == 0 only): s_t = input_scale for
//    every row; x_q[t, k] = e4m3(x[t, k] / s_t);
//  - empty input_scale, block == 0 (dynamic per token):
//    s_t = fp8_token_scale(max_k |x[t, k]|), x_q = e4m3(x / s_t);
//  - block == B: per token and group of B columns kb,
//    s[t, kb] = fp8_group_scale(max over the group), x_q = e4m3(x / s[t, kb]).
// The result, with every sum over k in f32 (any order):
//  - block == 0: out[t, n] = (sum_k x_q[t, k] w_q[n, k]) * s_t * weight_scale[n]
//  - block == B: out[t, n] = sum over kb in order of
//      (sum_{k in kb} x_q[t, k] w_q[n, k]) * s[t, kb] * weight_scale[n / B, kb]
// then + bias[n], rounded once to out's dtype. This is W8A8 as vLLM runs FP8
// checkpoints on Hopper; there is no weight-only mode.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace pagoda {

struct LinearWeight : Tensor {
  Tensor weight_scale;  // FP8 only, see above
  Tensor input_scale;   // FP8 only: [1] f32 static activation scale; empty: dynamic
  int32_t block = 0;    // FP8 only: 0 per-row scales; B: [B, B] weight blocks

  LinearWeight() = default;
  // A weight without scales: the compute dtype or a block dtype.
  LinearWeight(const Tensor& t) : Tensor(t) {}  // NOLINT(google-explicit-constructor)

  bool is_fp8() const { return dtype == DType::kF8E4M3; }
};

}  // namespace pagoda
