// Dequantization of ggml tensor types to f32: the float types here, the
// block formats through core/block_dequant.h (bit-exact with gguf-py).
#include <fmt/format.h>

#include <cstring>

#include "core/block_dequant.h"
#include "core/half.h"
#include "io/gguf.h"

namespace pagoda {

std::optional<DType> gguf_block_dtype(GgufType type) {
  switch (type) {
    case GgufType::kQ4_0:
      return DType::kQ4_0;
    case GgufType::kQ4_1:
      return DType::kQ4_1;
    case GgufType::kQ5_0:
      return DType::kQ5_0;
    case GgufType::kQ5_1:
      return DType::kQ5_1;
    case GgufType::kQ8_0:
      return DType::kQ8_0;
    case GgufType::kQ2_K:
      return DType::kQ2_K;
    case GgufType::kQ3_K:
      return DType::kQ3_K;
    case GgufType::kQ4_K:
      return DType::kQ4_K;
    case GgufType::kQ5_K:
      return DType::kQ5_K;
    case GgufType::kQ6_K:
      return DType::kQ6_K;
    default:
      return std::nullopt;
  }
}

bool gguf_can_dequantize(GgufType type) {
  return type == GgufType::kF32 || type == GgufType::kF16 || type == GgufType::kBF16 ||
         gguf_block_dtype(type).has_value();
}

Status dequantize(GgufType type, const uint8_t* data, int64_t n, float* out) {
  if (!gguf_can_dequantize(type)) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("cannot dequantize ggml type {} ({})", gguf_type_name(type),
                                  static_cast<uint32_t>(type)));
  }
  const GgufTypeTraits traits = *gguf_type_traits(type);
  if (n < 0 || n % traits.block_size != 0) {
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("cannot dequantize {} elements of {}: not a multiple of the block size {}", n,
                    gguf_type_name(type), traits.block_size));
  }
  if (const std::optional<DType> block = gguf_block_dtype(type)) {
    dequantize_blocks(*block, data, n, out);
    return Status::Ok();
  }
  for (int64_t i = 0; i < n; ++i) {
    if (type == GgufType::kF32) {
      std::memcpy(out + i, data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      out[i] = type == GgufType::kF16 ? fp16_to_float(h) : bf16_to_float(h);
    }
  }
  return Status::Ok();
}

}  // namespace pagoda
