// Element types of tensors in files and on backends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pagoda {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64, kU8, kI8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kI8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t);  // "f32", "bf16", ...

}  // namespace pagoda
