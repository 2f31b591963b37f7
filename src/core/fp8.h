// Host conversions between float and OCP float8 e4m3fn (DType::kF8E4M3), the
// format of FP8 checkpoints and the FP8 KV cache.
//
// e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; the
// only NaNs are 0x7f / 0xff; largest finite 448 (0x7e), smallest subnormal
// 2^-9. float_to_e4m3 rounds to nearest-even and saturates to +-448, which is
// bit-exact with CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)
// and with PyTorch's `x.clamp(-448, 448).to(torch.float8_e4m3fn)` (vLLM's
// quantisation). These two functions are the specification every FP8 kernel
// is tested against.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace pagoda {

inline constexpr float kE4M3Max = 448.0f;

inline float e4m3_to_float(uint8_t b) {
  const float sign = (b & 0x80u) ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 0xf;
  const int mant = b & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
}

inline uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fmin(std::fabs(f), kE4M3Max);
  if (a < 0x1p-6f) {
    // Subnormal range, quantum 2^-9: code = round(a * 2^9); 8 is exactly the
    // smallest normal's code (exponent field 1, mantissa 0).
    return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
  }
  int e = 0;
  const float m = std::frexp(a, &e) * 2.0f;  // a = m * 2^(e-1), m in [1, 2)
  int exp = e - 1;
  int q = static_cast<int>(std::nearbyint((m - 1.0f) * 8.0f));  // exact product, RNE
  if (q == 8) {
    q = 0;
    ++exp;
  }
  return sign | static_cast<uint8_t>(((exp + 7) << 3) | q);
}

}  // namespace pagoda
