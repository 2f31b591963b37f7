#include "core/kv_cache_dtype.h"

#include <fmt/format.h>

namespace pagoda {

Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view text) {
  if (text == "auto") return KvCacheDtype::kAuto;
  if (text == "bf16" || text == "bfloat16") return KvCacheDtype::kBF16;
  if (text == "fp16" || text == "float16") return KvCacheDtype::kF16;
  if (text == "fp8" || text == "fp8_e4m3") return KvCacheDtype::kFp8E4M3;
  if (text == "fp8_e5m2")
    return make_error(ErrorCode::kInvalidArgument,
                      "--kv-cache-dtype fp8_e5m2 is not supported: pagoda's FP8 KV cache is e4m3 "
                      "(use fp8 or fp8_e4m3)");
  return make_error(
      ErrorCode::kInvalidArgument,
      fmt::format("--kv-cache-dtype '{}' is not one of auto, bf16, fp16, fp8, fp8_e4m3", text));
}

Result<DType> resolve_kv_cache_dtype(KvCacheDtype choice, DType compute_dtype) {
  switch (choice) {
    case KvCacheDtype::kAuto:
      return compute_dtype;
    case KvCacheDtype::kFp8E4M3:
      return DType::kF8E4M3;
    case KvCacheDtype::kBF16:
    case KvCacheDtype::kF16: {
      const DType want = choice == KvCacheDtype::kBF16 ? DType::kBF16 : DType::kF16;
      if (want == compute_dtype) return want;
      return make_error(
          ErrorCode::kInvalidArgument,
          fmt::format("--kv-cache-dtype {} needs a backend computing in {}, but this one computes "
                      "in {} (the cache holds the compute dtype or fp8); use auto or fp8",
                      kv_cache_dtype_name(want), kv_cache_dtype_name(want),
                      kv_cache_dtype_name(compute_dtype)));
    }
  }
  return compute_dtype;
}

std::string kv_cache_dtype_name(DType cache_dtype) {
  switch (cache_dtype) {
    case DType::kF8E4M3:
      return "fp8_e4m3";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
    case DType::kF32:
      return "f32";
    default:
      return std::string(dtype_name(cache_dtype));
  }
}

}  // namespace pagoda
