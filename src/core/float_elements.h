// Element i of a host array of a float dtype (f32, f16, bf16), read as or
// written from float: the one dtype switch the host-side converters share
// (the weight loader, the cpu communicator). Writes round like PyTorch
// (half.h).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/half.h"

namespace pagoda {

constexpr bool is_float_dtype(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

// `t` must be a float dtype.
inline float load_float_element(DType t, const void* data, int64_t i) {
  switch (t) {
    case DType::kF16:
      return fp16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::kBF16:
      return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

inline void store_float_element(DType t, void* data, int64_t i, float v) {
  switch (t) {
    case DType::kF16:
      static_cast<uint16_t*>(data)[i] = float_to_fp16(v);
      break;
    case DType::kBF16:
      static_cast<uint16_t*>(data)[i] = float_to_bf16(v);
      break;
    default:
      static_cast<float*>(data)[i] = v;
      break;
  }
}

}  // namespace pagoda
