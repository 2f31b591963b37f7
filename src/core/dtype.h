// Element types of tensors in files and on backends.
//
// Scalar types (f32 ... f8_e4m3) hold one element per dtype_size() bytes. Block
// types (q4_0 ... q6_K) are ggml's quantization formats, kept byte for byte
// as in a GGUF file: a row of K elements is K / dtype_block_elems() blocks of
// dtype_block_bytes() bytes each, blocks running along K (the last, contiguous
// dimension). A block tensor is only ever a linear weight [N, K] (rows =
// output features) with K a multiple of the block; Backend::linear is the one
// op that reads it (core/block_dequant.h dequantizes it on the host).
//
// Group formats (w4g32 ... w8g128, pagoda's own): AWQ / GPTQ checkpoints
// repacked at load (io/int_quant_source.h) into the same row-of-blocks
// shape. A block is one quantization group of G (32, 64 or 128) consecutive
// elements of a row:
//   bytes [0, 2)  scale s, f16
//   bytes [2, 4)  zero point z, u16 little-endian (0 .. 2^bits; GPTQ v1's
//                 stored z - 1 plus one can reach 2^bits)
//   bytes [4, ..) the G quants q: 4-bit: byte j holds element 2j in its low
//                 nibble and 2j + 1 in its high nibble; 8-bit: byte j is q_j
// and element value (q - z) * s in f32. Blocks are 4 + G * bits / 8 bytes:
// 20 / 36 / 68 (4-bit) and 36 / 68 / 132 (8-bit), multiples of 4, and 32
// blocks of 128 (16 of 64, 128 of 32) are whole 16-byte chunks.
// The _perm variants (GPTQ desc_act) store the columns of K permuted so each
// group is contiguous: stored column i is column perm[i] of the logical
// weight. perm, K int32, follows the N rows of blocks (at byte
// dtype_nbytes(t, N * K); dtype_k_perm_bytes() more bytes).
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
  // Group formats (see above): elements per block (G) / bytes (4 + G * bits / 8).
  kW4G32,   // 32 / 20
  kW4G64,   // 64 / 36
  kW4G128,  // 128 / 68
  kW8G32,   // 32 / 36
  kW8G64,   // 64 / 68
  kW8G128,  // 128 / 132
  // The same with K permuted (perm after the rows).
  kW4G32Perm,
  kW4G64Perm,
  kW4G128Perm,
  kW8G32Perm,
  kW8G64Perm,
  kW8G128Perm,
};

constexpr bool is_block_dtype(DType t) {
  return t >= DType::kQ4_0;
}

// The group formats (w4g32 ... w8g128_perm).
constexpr bool is_group_dtype(DType t) {
  return t >= DType::kW4G32;
}

// True for the _perm group formats.
constexpr bool has_k_perm(DType t) {
  return t >= DType::kW4G32Perm;
}

// A _perm group format without its permutation; t otherwise.
constexpr DType without_k_perm(DType t) {
  return has_k_perm(t) ? static_cast<DType>(static_cast<int>(t) - 6) : t;
}

// Bits per quant of a group format: 4 or 8; 0 for other types.
constexpr int group_dtype_bits(DType t) {
  if (!is_group_dtype(t)) return 0;
  return without_k_perm(t) <= DType::kW4G128 ? 4 : 8;
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
    case DType::kW4G32:
    case DType::kW8G32:
    case DType::kW4G32Perm:
    case DType::kW8G32Perm: return 32;
    case DType::kW4G64:
    case DType::kW8G64:
    case DType::kW4G64Perm:
    case DType::kW8G64Perm: return 64;
    case DType::kW4G128:
    case DType::kW8G128:
    case DType::kW4G128Perm:
    case DType::kW8G128Perm: return 128;
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
    default: break;
  }
  if (is_group_dtype(t)) return 4 + dtype_block_elems(t) * group_dtype_bits(t) / 8;
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

// The group format of `bits` (4, 8) and group (32, 64, 128), with or
// without the K permutation; kF32 when there is none.
constexpr DType group_dtype(int bits, int64_t group, bool perm) {
  const int g = group == 32 ? 0 : group == 64 ? 1 : group == 128 ? 2 : -1;
  if (g < 0 || (bits != 4 && bits != 8)) return DType::kF32;
  return static_cast<DType>(static_cast<int>(DType::kW4G32) + (bits == 8 ? 3 : 0) + g +
                            (perm ? 6 : 0));
}

// Bytes after the N rows of blocks of a weight [N, K] in `t`: K int32 of
// the permutation for a _perm format, else 0.
constexpr size_t dtype_k_perm_bytes(DType t, int64_t k) {
  return has_k_perm(t) ? static_cast<size_t>(k) * 4 : 0;
}

std::string_view dtype_name(DType t);  // "f32", "bf16", "q4_K", ...

}  // namespace pagoda
