// Random ggml blocks for the quantized-linear tests (CPU here, CUDA in
// tests/gpu): random quant bytes, with every f16 scale field (d, and m /
// dmin where the format has one; a group format's s) overwritten by a finite
// value, so the dequantized weights are finite, and a group format's zero
// point drawn from [0, 2^bits]. Scale magnitudes are drawn log-uniformly
// over [2^-16, 2^-2] (f16 subnormals included) with a random sign, and one
// block in 16 gets a zero scale.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"

namespace pagoda::test {

// Every block dtype without a K permutation, in dtype.h order.
inline const std::vector<DType>& block_dtypes() {
  static const std::vector<DType> all = {
      DType::kQ4_0,   DType::kQ4_1,  DType::kQ5_0,  DType::kQ5_1,  DType::kQ8_0,  DType::kQ2_K,
      DType::kQ3_K,   DType::kQ4_K,  DType::kQ5_K,  DType::kQ6_K,  DType::kW4G32, DType::kW4G64,
      DType::kW4G128, DType::kW8G32, DType::kW8G64, DType::kW8G128};
  return all;
}

// The group formats with a K permutation (GPTQ act order).
inline const std::vector<DType>& k_perm_dtypes() {
  static const std::vector<DType> all = {DType::kW4G32Perm, DType::kW4G64Perm, DType::kW4G128Perm,
                                         DType::kW8G32Perm, DType::kW8G64Perm, DType::kW8G128Perm};
  return all;
}

// Byte offsets of the f16 scale fields of one block of `t`.
inline std::vector<int> block_scale_offsets(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
      return {0};
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    case DType::kQ6_K:
      return {208};
    default:
      return is_group_dtype(t) ? std::vector<int>{0} : std::vector<int>{};
  }
}

// `num_blocks` random blocks of block dtype `t`.
inline std::vector<uint8_t> random_blocks(DType t, int64_t num_blocks, std::mt19937_64& gen) {
  const size_t bytes = dtype_block_bytes(t);
  std::vector<uint8_t> out(static_cast<size_t>(num_blocks) * bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : out) b = static_cast<uint8_t>(byte(gen));
  std::uniform_real_distribution<float> exponent(-16.0f, -2.0f);
  std::uniform_int_distribution<int> coin(0, 15);
  for (int64_t i = 0; i < num_blocks; ++i) {
    for (int off : block_scale_offsets(t)) {
      float s = std::exp2(exponent(gen)) * (coin(gen) % 2 == 0 ? 1.0f : -1.0f);
      if (coin(gen) == 0) s = 0.0f;
      const uint16_t h = float_to_fp16(s);
      std::memcpy(out.data() + static_cast<size_t>(i) * bytes + off, &h, 2);
    }
    if (is_group_dtype(t)) {  // a zero point in [0, 2^bits] (GPTQ v1 reaches 2^bits)
      std::uniform_int_distribution<int> zero(0, 1 << group_dtype_bits(t));
      const auto z = static_cast<uint16_t>(zero(gen));
      std::memcpy(out.data() + static_cast<size_t>(i) * bytes + 2, &z, 2);
    }
  }
  return out;
}

// A random weight [n, k] in `t`: random_blocks(), then for a _perm format a
// random permutation of K (int32) after the rows.
inline std::vector<uint8_t> random_weight(DType t, int64_t n, int64_t k, std::mt19937_64& gen) {
  std::vector<uint8_t> out = random_blocks(t, n * k / dtype_block_elems(t), gen);
  if (!has_k_perm(t)) return out;
  std::vector<int32_t> perm(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) perm[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::shuffle(perm.begin(), perm.end(), gen);
  const size_t at = out.size();
  out.resize(at + dtype_k_perm_bytes(t, k));
  std::memcpy(out.data() + at, perm.data(), perm.size() * 4);
  return out;
}

}  // namespace pagoda::test
