// --kv-cache-dtype: the values accepted, the refusals and what each resolves
// to on a backend of a given compute dtype.
#include "core/kv_cache_dtype.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

TEST(KvCacheDtype, ParsesVllmAndShortNames) {
  EXPECT_EQ(*parse_kv_cache_dtype("auto"), KvCacheDtype::kAuto);
  EXPECT_EQ(*parse_kv_cache_dtype("bf16"), KvCacheDtype::kBF16);
  EXPECT_EQ(*parse_kv_cache_dtype("bfloat16"), KvCacheDtype::kBF16);
  EXPECT_EQ(*parse_kv_cache_dtype("fp16"), KvCacheDtype::kF16);
  EXPECT_EQ(*parse_kv_cache_dtype("float16"), KvCacheDtype::kF16);
  EXPECT_EQ(*parse_kv_cache_dtype("fp8"), KvCacheDtype::kFp8E4M3);
  EXPECT_EQ(*parse_kv_cache_dtype("fp8_e4m3"), KvCacheDtype::kFp8E4M3);
}

TEST(KvCacheDtype, RefusesE5m2AndUnknownValuesByName) {
  Result<KvCacheDtype> r = parse_kv_cache_dtype("fp8_e5m2");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("fp8_e5m2 is not supported"), std::string::npos)
      << r.error().message;
  for (const char* bad : {"", "FP8", "int8", "fp8_e4m3fn", "f32"}) {
    r = parse_kv_cache_dtype(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("--kv-cache-dtype"), std::string::npos) << r.error().message;
  }
}

TEST(KvCacheDtype, ResolvesAgainstTheComputeDtype) {
  EXPECT_EQ(*resolve_kv_cache_dtype(KvCacheDtype::kAuto, DType::kBF16), DType::kBF16);
  EXPECT_EQ(*resolve_kv_cache_dtype(KvCacheDtype::kAuto, DType::kF32), DType::kF32);
  EXPECT_EQ(*resolve_kv_cache_dtype(KvCacheDtype::kFp8E4M3, DType::kBF16), DType::kF8E4M3);
  EXPECT_EQ(*resolve_kv_cache_dtype(KvCacheDtype::kFp8E4M3, DType::kF32), DType::kF8E4M3);
  EXPECT_EQ(*resolve_kv_cache_dtype(KvCacheDtype::kBF16, DType::kBF16), DType::kBF16);
  EXPECT_EQ(*resolve_kv_cache_dtype(KvCacheDtype::kF16, DType::kF16), DType::kF16);
  // A 16-bit cache other than the compute dtype is refused (cpu computes in f32).
  Result<DType> r = resolve_kv_cache_dtype(KvCacheDtype::kBF16, DType::kF32);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--kv-cache-dtype bf16"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("computes in f32"), std::string::npos) << r.error().message;
  EXPECT_FALSE(resolve_kv_cache_dtype(KvCacheDtype::kF16, DType::kBF16).ok());
}

TEST(KvCacheDtype, Names) {
  EXPECT_EQ(kv_cache_dtype_name(DType::kF8E4M3), "fp8_e4m3");
  EXPECT_EQ(kv_cache_dtype_name(DType::kBF16), "bf16");
  EXPECT_EQ(kv_cache_dtype_name(DType::kF16), "fp16");
  EXPECT_EQ(kv_cache_dtype_name(DType::kF32), "f32");
}

}  // namespace
}  // namespace pagoda
