#include "core/dtype.h"

namespace pagoda {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kI8: return "i8";
    case DType::kF8E4M3: return "f8_e4m3";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ4_1: return "q4_1";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ2_K: return "q2_K";
    case DType::kQ3_K: return "q3_K";
    case DType::kQ4_K: return "q4_K";
    case DType::kQ5_K: return "q5_K";
    case DType::kQ6_K: return "q6_K";
    case DType::kW4G32: return "w4g32";
    case DType::kW4G64: return "w4g64";
    case DType::kW4G128: return "w4g128";
    case DType::kW8G32: return "w8g32";
    case DType::kW8G64: return "w8g64";
    case DType::kW8G128: return "w8g128";
    case DType::kW4G32Perm: return "w4g32_perm";
    case DType::kW4G64Perm: return "w4g64_perm";
    case DType::kW4G128Perm: return "w4g128_perm";
    case DType::kW8G32Perm: return "w8g32_perm";
    case DType::kW8G64Perm: return "w8g64_perm";
    case DType::kW8G128Perm: return "w8g128_perm";
  }
  return "?";
}

}  // namespace pagoda
