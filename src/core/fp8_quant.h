// The quantisation arithmetic of FP8 (e4m3) W8A8 linear layers: how
// activations and weights become e4m3 codes and scales. With core/fp8.h's
// conversions this is the specification that the CPU backend implements and
// every CUDA kernel is tested against (the linear itself:
// backend/linear_weight.h). The guards follow vLLM: per-token scales
// (dynamic_per_token_scaled_fp8_quant) are at least 1 / (448 * 512); per-group
// scales (per_token_group_quant_fp8) divide max(amax, 1e-10) by 448. A value
// is quantised as e4m3(x / scale), an IEEE f32 division, saturating at +-448.
#pragma once

#include <cstdint>

#include "core/fp8.h"

namespace pagoda {

inline constexpr float kFp8MinTokenScale = 1.0f / (kE4M3Max * 512.0f);
inline constexpr float kFp8MinGroupAmax = 1e-10f;

// max_i |x[i]| over n elements (0 for n = 0; NaN is ignored).
float fp8_amax(const float* x, int64_t n);

// The dynamic scale of one token's row (or of one weight row, per channel):
// max(amax / 448, kFp8MinTokenScale).
inline float fp8_token_scale(float amax) {
  const float s = amax / kE4M3Max;
  return s > kFp8MinTokenScale ? s : kFp8MinTokenScale;
}

// The dynamic scale of one token's 128-column group (block-wise FP8):
// max(amax, 1e-10) / 448.
inline float fp8_group_scale(float amax) {
  return (amax > kFp8MinGroupAmax ? amax : kFp8MinGroupAmax) / kE4M3Max;
}

// out[i] = e4m3(x[i] / scale) for i < n.
void fp8_quantize(const float* x, int64_t n, float scale, uint8_t* out);

// The e4m3 code's value as f32 for all 256 codes (codes 0x7f / 0xff: NaN).
const float* e4m3_value_table();

}  // namespace pagoda
