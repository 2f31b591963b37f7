// --kv-cache-dtype: the element type of the paged KV cache, and where the
// FP8 cache's scales come from.
//
// FP8 KV cache semantics (vLLM's `--kv-cache-dtype fp8`, e4m3 on CUDA):
//   - each cache element is OCP float8 e4m3fn, rounded and saturated by
//     core/fp8.h's float_to_e4m3 (round to nearest even, clamp to +-448);
//   - every layer has two f32 scales, k_scale and v_scale: the cache write
//     stores e4m3(k / k_scale) and e4m3(v / v_scale), attention reads
//     e4m3_to_float(q) * k_scale (and * v_scale); q and the attention output
//     stay in the compute dtype;
//   - the scales come from the checkpoint when it has them
//     (model/kv_scales.h), else 1.0 (vLLM's default when a checkpoint has none): no calibration.
// Block size, prefix caching, preemption, graphs and speculative decoding do
// not depend on the element type; an FP8 block holds half the bytes of a
// bf16 one, so the same memory holds twice the tokens.
#pragma once

#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/result.h"

namespace pagoda {

enum class KvCacheDtype {
  kAuto,     // the compute dtype (the model's dtype on cuda, f32 on cpu)
  kBF16,     // bf16 / bfloat16: only where the compute dtype is bf16
  kF16,      // fp16 / float16: only where the compute dtype is f16
  kFp8E4M3,  // fp8 / fp8_e4m3
};

// Parses a --kv-cache-dtype value: auto, bf16 (bfloat16), fp16 (float16),
// fp8 or fp8_e4m3. Errors name the flag and the value; fp8_e5m2 (vLLM's
// other FP8 cache) is refused as not supported.
Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view text);

// The cache's element type on a backend computing in `compute_dtype`: auto
// is the compute dtype, fp8 is kF8E4M3. A 16-bit choice must equal the
// compute dtype (the kernels read the cache in it): bf16 for an f16 model,
// or either on the cpu backend (f32), is refused with a message naming the
// flag.
Result<DType> resolve_kv_cache_dtype(KvCacheDtype choice, DType compute_dtype);

// The name the startup summary and /metrics show: "fp8_e4m3", "bf16",
// "fp16" or "f32".
std::string kv_cache_dtype_name(DType cache_dtype);

}  // namespace pagoda
