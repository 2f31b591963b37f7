// Block dequantization, bit-exact with gguf-py (gguf.quants.dequantize):
// every product is an f32 multiply in the same order as the numpy code, and
// this file is compiled with -ffp-contract=off so no multiply-add is fused.
#include "core/block_dequant.h"

#include <cassert>
#include <cstring>
#include <vector>

#include "core/half.h"

namespace pagoda {

namespace {

constexpr int kQK = 32;    // block size of the Q4_0..Q8_0 formats
constexpr int kQKK = 256;  // super-block size of the K formats

float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_float(h);
}

// Q4_0: d f16 | qs[16]; element j < 16 is the low nibble of qs[j], j >= 16 the
// high nibble of qs[j - 16]; value d * (q - 8).
void dequant_q4_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
    y[j + kQK / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// Q4_1: d f16 | m f16 | qs[16]; value d * q + m.
void dequant_q4_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
    y[j + kQK / 2] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// 5-bit quant j of a Q5 block: nibble as Q4, bit 4 from bit j of qh.
int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int low = j < kQK / 2 ? (qs[j] & 0x0F) : (qs[j - kQK / 2] >> 4);
  return low | static_cast<int>(((qh >> j) & 1u) << 4);
}

// Q5_0: d f16 | qh u32 | qs[16]; value d * (q - 16).
void dequant_q5_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(q5_value(b + 6, qh, j) - 16);
}

// Q5_1: d f16 | m f16 | qh u32 | qs[16]; value d * q + m.
void dequant_q5_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(q5_value(b + 8, qh, j)) + m;
}

// Q8_0: d f16 | qs int8[32]; value q * d.
void dequant_q8_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// Q2_K: scales[16] | qs[64] | d f16 | dmin f16. Element e = i*128 + s*32 + l
// takes bits 2s..2s+1 of qs[i*32 + l]; sub-block e/16 has scale (d * sc&15)
// and min (dmin * sc>>4); value dl * q - ml.
void dequant_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = load_f16(b + 80);
  const float dmin = load_f16(b + 82);
  for (int e = 0; e < kQKK; ++e) {
    const int i = e / 128, s = (e / 32) % 4, l = e % 32;
    const float q = static_cast<float>((qs[i * 32 + l] >> (2 * s)) & 3);
    const uint8_t sc = scales[e / 16];
    const float dl = d * static_cast<float>(sc & 0x0F);
    const float ml = dmin * static_cast<float>(sc >> 4);
    y[e] = dl * q - ml;
  }
}

// Q3_K 6-bit scale j (0..15) from the 12 packed bytes, minus 32.
int q3_k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? (scales[j] & 0x0F) : (scales[j - 8] >> 4);
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Q3_K: hmask[32] | qs[64] | scales[12] | d f16. Element e = i*128 + s*32 + l
// has low bits 2s..2s+1 of qs[i*32 + l] and subtracts 4 when bit e/32 of
// hmask[l] is clear; value (d * scale[e/16]) * q.
void dequant_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* scales = b + 96;
  const float d = load_f16(b + 108);
  for (int e = 0; e < kQKK; ++e) {
    const int i = e / 128, s = (e / 32) % 4, l = e % 32;
    const int low = (qs[i * 32 + l] >> (2 * s)) & 3;
    const int high_clear = ((hmask[l] >> (e / 32)) & 1) ^ 1;
    const float q = static_cast<float>(low - (high_clear << 2));
    const float dl = d * static_cast<float>(q3_k_scale(scales, e / 16));
    y[e] = dl * q;
  }
}

// Q4_K/Q5_K 6-bit scale and min of sub-block j (0..7) from 12 packed bytes.
void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 0x3F;
    *m = s[j + 4] & 0x3F;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30);
    *m = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
  }
}

// Q4_K: d f16 | dmin f16 | scales[12] | qs[128]. Element e = i*64 + h*32 + l
// is nibble h of qs[i*32 + l]; value (d * sc[e/32]) * q - dmin * m[e/32].
// Q5_K adds qh[32] before qs: bit e/32 of qh[l] is bit 4 of q.
void dequant_q4_q5_k(const uint8_t* b, float* y, bool five_bit) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = five_bit ? b + 48 : b + 16;
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    k_scale_min(scales, j, &sc, &m);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(m);
    const int i = j / 2, h = j % 2;
    for (int l = 0; l < 32; ++l) {
      int q = (qs[i * 32 + l] >> (4 * h)) & 0x0F;
      if (five_bit) q |= ((qh[l] >> j) & 1) << 4;
      y[j * 32 + l] = dl * static_cast<float>(q) - ml;
    }
  }
}

// Q6_K: ql[128] | qh[64] | scales int8[16] | d f16. Element e = i*128 + r
// (r < 128): low nibble (r/64) of ql[i*64 + r%64], high bits 2*(r/32)..+1 of
// qh[i*32 + r%32]; value (d * scale[e/16]) * (q - 32).
void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = load_f16(b + 208);
  for (int e = 0; e < kQKK; ++e) {
    const int i = e / 128, r = e % 128;
    const int low = (ql[i * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
    const int high = (qh[i * 32 + r % 32] >> (2 * (r / 32))) & 3;
    const float q = static_cast<float>((low | (high << 4)) - 32);
    const float dl = d * static_cast<float>(scales[e / 16]);
    y[e] = dl * q;
  }
}

// A group-format block (core/dtype.h) of G elements, `bits` 4 or 8: s f16 |
// z u16 | quants; value (q - z) * s.
template <int kBits, int kGroup>
void dequant_group(const uint8_t* b, float* y) {
  const float s = load_f16(b);
  const int z = b[2] | (b[3] << 8);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kGroup; ++j) {
    const int q = kBits == 8 ? qs[j] : (qs[j / 2] >> (4 * (j % 2))) & 0x0F;
    y[j] = static_cast<float>(q - z) * s;
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

void dequant_q4_k(const uint8_t* b, float* y) {
  dequant_q4_q5_k(b, y, false);
}
void dequant_q5_k(const uint8_t* b, float* y) {
  dequant_q4_q5_k(b, y, true);
}

BlockFn block_fn(DType type) {
  switch (type) {
    case DType::kQ4_0:
      return dequant_q4_0;
    case DType::kQ4_1:
      return dequant_q4_1;
    case DType::kQ5_0:
      return dequant_q5_0;
    case DType::kQ5_1:
      return dequant_q5_1;
    case DType::kQ8_0:
      return dequant_q8_0;
    case DType::kQ2_K:
      return dequant_q2_k;
    case DType::kQ3_K:
      return dequant_q3_k;
    case DType::kQ4_K:
      return dequant_q4_k;
    case DType::kQ5_K:
      return dequant_q5_k;
    case DType::kQ6_K:
      return dequant_q6_k;
    case DType::kW4G32:
    case DType::kW4G32Perm:
      return dequant_group<4, 32>;
    case DType::kW4G64:
    case DType::kW4G64Perm:
      return dequant_group<4, 64>;
    case DType::kW4G128:
    case DType::kW4G128Perm:
      return dequant_group<4, 128>;
    case DType::kW8G32:
    case DType::kW8G32Perm:
      return dequant_group<8, 32>;
    case DType::kW8G64:
    case DType::kW8G64Perm:
      return dequant_group<8, 64>;
    case DType::kW8G128:
    case DType::kW8G128Perm:
      return dequant_group<8, 128>;
    default:
      return nullptr;
  }
}

}  // namespace

void dequantize_blocks(DType type, const void* blocks, int64_t n, float* out) {
  const BlockFn fn = block_fn(type);
  assert(fn != nullptr && n % dtype_block_elems(type) == 0);
  const auto* b = static_cast<const uint8_t*>(blocks);
  const int64_t elems = dtype_block_elems(type);
  const size_t bytes = dtype_block_bytes(type);
  for (int64_t i = 0; i < n / elems; ++i) fn(b + i * bytes, out + i * elems);
}

void dequantize_weight_rows(DType type, const void* w, int64_t n, int64_t k, int64_t first_row,
                            int64_t num_rows, float* out) {
  assert(first_row >= 0 && num_rows >= 0 && first_row + num_rows <= n);
  const size_t row_bytes = dtype_nbytes(type, k);
  const auto* rows = static_cast<const uint8_t*>(w) + static_cast<size_t>(first_row) * row_bytes;
  if (!has_k_perm(type)) {
    dequantize_blocks(type, rows, num_rows * k, out);
    return;
  }
  const auto* perm =
      reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(w) + dtype_nbytes(type, n * k));
  std::vector<float> stored(static_cast<size_t>(k));
  for (int64_t r = 0; r < num_rows; ++r) {
    dequantize_blocks(type, rows + static_cast<size_t>(r) * row_bytes, k, stored.data());
    float* o = out + r * k;
    for (int64_t i = 0; i < k; ++i) o[perm[i]] = stored[static_cast<size_t>(i)];
  }
}

}  // namespace pagoda
