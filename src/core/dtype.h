// Element types of tensors in files and on backends.
//
// Scalar types (f32 ... f8_e4m3) hold one element per dtype_size() bytes. Block
// types (q4_0 ... q6_K) are ggml's quantization formats, kept byte for byte
// as in a GGUF file: a row of K elements is K / dtype_block_elems() blocks of
// dtype_block_bytes() bytes each, blocks running along K (the last, contiguous
// dimension). A block tensor is only ever a linear weight [N, K] (rows =
// output features) with K a multiple of the block; Backend::linear is the one
// op that reads it (core/block_dequant.h dequantizes it on the host).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pagoda {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kI32,
  kI64,
  kU8,
  kI8,
  kF8E4M3,  // OCP float8 e4m3fn (core/fp8.h): no infinities, max 448
  // ggml block formats: elements per block / bytes per block.
  kQ4_0,  // 32 / 18
  kQ4_1,  // 32 / 20
  kQ5_0,  // 32 / 22
  kQ5_1,  // 32 / 24
  kQ8_0,  // 32 / 34
  kQ2_K,  // 256 / 84
  kQ3_K,  // 256 / 110
  kQ4_K,  // 256 / 144
  kQ5_K,  // 256 / 176
  kQ6_K,  // 256 / 210
};

constexpr bool is_block_dtype(DType t) {
  return t >= DType::kQ4_0;
}

// Elements per block: 1 for scalar types.
constexpr int64_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0: return 32;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return 256;
    default: return 1;
  }
}

// Bytes per block: dtype_size() for scalar types.
constexpr size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kI8: return 1;
    case DType::kF8E4M3: return 1;
    case DType::kQ4_0: return 18;
    case DType::kQ4_1: return 20;
    case DType::kQ5_0: return 22;
    case DType::kQ5_1: return 24;
    case DType::kQ8_0: return 34;
    case DType::kQ2_K: return 84;
    case DType::kQ3_K: return 110;
    case DType::kQ4_K: return 144;
    case DType::kQ5_K: return 176;
    case DType::kQ6_K: return 210;
  }
  return 0;
}

// Bytes per element of a scalar type; 0 for block types, which have no
// per-element size (use dtype_nbytes()).
constexpr size_t dtype_size(DType t) {
  return is_block_dtype(t) ? 0 : dtype_block_bytes(t);
}

// Bytes of n elements; for a block type n must be whole blocks (rows whose
// length is a multiple of dtype_block_elems()).
constexpr size_t dtype_nbytes(DType t, int64_t n) {
  return static_cast<size_t>(n / dtype_block_elems(t)) * dtype_block_bytes(t);
}

std::string_view dtype_name(DType t);  // "f32", "bf16", "q4_K", ...

}  // namespace pagoda
