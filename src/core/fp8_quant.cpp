#include "core/fp8_quant.h"

#include <array>
#include <cmath>

namespace pagoda {

float fp8_amax(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > m) m = a;
  }
  return m;
}

void fp8_quantize(const float* x, int64_t n, float scale, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_e4m3(x[i] / scale);
}

const float* e4m3_value_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = e4m3_to_float(static_cast<uint8_t>(b));
    return t;
  }();
  return table.data();
}

}  // namespace pagoda
