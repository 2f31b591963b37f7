// Loading FP8 linear weights (weight_loader.h "FP8"): codes and scales of
// each checkpoint layout, fused parts and tensor-parallel slices, the online
// scheme, and an error naming the tensor for every inconsistency.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/fp8.h"
#include "core/fp8_quant.h"
#include "memory_source.h"
#include "model/architecture.h"
#include "model/load_weights.h"

namespace pagoda {
namespace {

using test::MemorySource;
using test::tiny_config;

template <typename T>
std::string error_of(const Result<T>& r) {
  return r.ok() ? "" : r.error().message;
}

std::vector<float> floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}
std::vector<uint8_t> bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return std::vector<uint8_t>(p, p + t.numel());
}

const char* const kLinears[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                "mlp.down_proj"};

// What quantise() stored for one linear: codes [n, k] and scales as stored.
struct Stored {
  int64_t n = 0, k = 0;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  float input_scale = 0.0f;
};

// Replaces every layer linear of `src` (f32) by F8_E4M3 codes and the
// scales `q` describes: per tensor, per row, or per [b, b] tile, each
// amax / 448; input scales 0.01 * (1 + index of the linear).
std::map<std::string, Stored> quantise(const ModelConfig& c, const QuantizationConfig& q,
                                       MemorySource* src) {
  std::map<std::string, Stored> out;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    int index = 0;
    for (const char* lin : kLinears) {
      const std::string m = "model.layers." + std::to_string(l) + "." + lin;
      HostTensor h = src->read(m + ".weight").value();
      Stored s;
      s.n = h.shape[0];
      s.k = h.shape[1];
      const auto* w = static_cast<const float*>(h.data);
      const int64_t b = q.weight_scales == Fp8WeightScales::kBlock ? q.block : 0;
      const int64_t nb = b ? (s.n + b - 1) / b : 0, kb = b ? (s.k + b - 1) / b : 0;
      auto scale_of = [&](int64_t r, int64_t col) -> size_t {
        if (b) return static_cast<size_t>((r / b) * kb + col / b);
        return q.weight_scales == Fp8WeightScales::kChannel ? static_cast<size_t>(r) : 0;
      };
      const size_t num_scales =
          b ? static_cast<size_t>(nb * kb)
            : (q.weight_scales == Fp8WeightScales::kChannel ? static_cast<size_t>(s.n) : 1);
      std::vector<float> amax(num_scales, 0.0f);
      for (int64_t r = 0; r < s.n; ++r)
        for (int64_t col = 0; col < s.k; ++col)
          amax[scale_of(r, col)] = std::max(amax[scale_of(r, col)], std::fabs(w[r * s.k + col]));
      for (float a : amax) s.scales.push_back(a / 448.0f);
      for (int64_t r = 0; r < s.n; ++r)
        for (int64_t col = 0; col < s.k; ++col)
          s.codes.push_back(float_to_e4m3(w[r * s.k + col] / s.scales[scale_of(r, col)]));
      src->add_raw(m + ".weight", {s.n, s.k}, DType::kF8E4M3, s.codes);
      if (b) {
        src->add(m + "." + q.block_scale_name, {nb, kb}, s.scales);
      } else if (q.weight_scales == Fp8WeightScales::kChannel) {
        src->add(m + ".weight_scale", {s.n, 1}, s.scales, DType::kBF16);
        for (float& x : s.scales) x = bf16_to_float(float_to_bf16(x));  // as stored
      } else {
        src->add(m + ".weight_scale", {}, s.scales);
      }
      s.input_scale = 0.01f * static_cast<float>(++index);
      if (q.static_activations) src->add(m + ".input_scale", {1}, {s.input_scale});
      out[m] = s;
    }
  }
  return out;
}

QuantizationConfig per_channel() {
  QuantizationConfig q;
  q.method = QuantMethod::kCompressedTensors;
  q.weight_scales = Fp8WeightScales::kChannel;
  return q;
}
QuantizationConfig per_tensor_static() {
  QuantizationConfig q;
  q.method = QuantMethod::kModelOpt;
  q.weight_scales = Fp8WeightScales::kTensor;
  q.static_activations = true;
  return q;
}
QuantizationConfig blocks(int32_t b) {
  QuantizationConfig q;
  q.method = QuantMethod::kFp8;
  q.weight_scales = Fp8WeightScales::kBlock;
  q.block = b;
  return q;
}

// Rows [lo, hi) of a stored linear's codes, columns [c0, c1).
std::vector<uint8_t> codes_of(const Stored& s, int64_t lo, int64_t hi, int64_t c0, int64_t c1) {
  std::vector<uint8_t> v;
  for (int64_t r = lo; r < hi; ++r)
    for (int64_t c = c0; c < c1; ++c) v.push_back(s.codes[static_cast<size_t>(r * s.k + c)]);
  return v;
}
// Each row's scale, per tensor or per channel.
std::vector<float> row_scales(const Stored& s, int64_t lo, int64_t hi) {
  std::vector<float> v;
  for (int64_t r = lo; r < hi; ++r) v.push_back(s.scales.size() == 1 ? s.scales[0] : s.scales[r]);
  return v;
}
template <typename T>
void append(std::vector<T>& a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

TEST(Fp8Weights, FusedPartsKeepTheirOwnRowScales) {
  for (const QuantizationConfig& q : {per_channel(), per_tensor_static()}) {
    CpuBackend be;
    ModelConfig c = tiny_config();
    c.quantization = q;
    MemorySource src;
    test::fill_random(c, &src);
    auto stored = quantise(c, q, &src);
    auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
    ASSERT_TRUE(w.ok()) << error_of(w);
    const LayerWeights& l = w->layers[1];
    const std::string p = "model.layers.1.";
    ASSERT_TRUE(l.qkv.is_fp8());
    std::vector<uint8_t> want_codes;
    std::vector<float> want_scales;
    for (const char* part : {"q", "k", "v"}) {
      const Stored& s = stored.at(p + "self_attn." + part + "_proj");
      append(want_codes, codes_of(s, 0, s.n, 0, s.k));
      append(want_scales, row_scales(s, 0, s.n));
    }
    EXPECT_EQ(bytes(l.qkv), want_codes);
    EXPECT_EQ(floats(l.qkv.weight_scale), want_scales);
    EXPECT_EQ(l.qkv.block, 0);
    if (q.static_activations) {  // the largest of q, k, v's (0.01, 0.02, 0.03)
      EXPECT_EQ(floats(l.qkv.input_scale),
                std::vector<float>{stored.at(p + "self_attn.v_proj").input_scale});
      EXPECT_EQ(floats(l.down.input_scale),
                std::vector<float>{stored.at(p + "mlp.down_proj").input_scale});
    } else {
      EXPECT_TRUE(l.qkv.input_scale.empty());
    }
    const Stored& down = stored.at(p + "mlp.down_proj");
    EXPECT_EQ(bytes(l.down), codes_of(down, 0, down.n, 0, down.k));
    EXPECT_FALSE(w->lm_head.is_fp8());  // stored f32: loads as before
    EXPECT_TRUE(w->bytes_by_dtype.count(DType::kF8E4M3));
  }
}

TEST(Fp8Weights, BlockScalesOfFusedPartsAndTensorParallelSlices) {
  // Block 8: q rows 32, k / v rows 16, hidden 32, intermediate 48: all whole blocks.
  const QuantizationConfig q = blocks(8);
  for (int size : {1, 2}) {
    for (int rank = 0; rank < size; ++rank) {
      CpuBackend be;
      ModelConfig c = tiny_config();
      c.quantization = q;
      MemorySource src;
      test::fill_random(c, &src);
      auto stored = quantise(c, q, &src);
      auto w = load_model_weights(*find_architecture(c).value(), c, be, src, TpShard{rank, size});
      ASSERT_TRUE(w.ok()) << error_of(w);
      const LayerWeights& l = w->layers[0];
      const std::string p = "model.layers.0.";
      EXPECT_EQ(l.qkv.block, 8);
      // qkv: each part's rows of this rank, their block rows' scales stacked.
      std::vector<uint8_t> want_codes;
      std::vector<float> want_scales;
      for (const char* part : {"q", "k", "v"}) {
        const Stored& s = stored.at(p + "self_attn." + part + "_proj");
        const int64_t rows = s.n / size, lo = rank * rows;
        append(want_codes, codes_of(s, lo, lo + rows, 0, s.k));
        for (int64_t r = lo / 8; r < (lo + rows) / 8; ++r)
          for (int64_t cb = 0; cb < 4; ++cb) want_scales.push_back(s.scales[r * 4 + cb]);
      }
      EXPECT_EQ(bytes(l.qkv), want_codes);
      EXPECT_EQ(floats(l.qkv.weight_scale), want_scales);
      EXPECT_EQ(l.qkv.weight_scale.dim(0), (32 + 16 + 16) / size / 8);
      // down: columns [rank 24, rank 24 + 24) of [32, 48]: 3 column blocks of 6.
      const Stored& d = stored.at(p + "mlp.down_proj");
      const int64_t cols = 48 / size, c0 = rank * cols;
      EXPECT_EQ(bytes(l.down), codes_of(d, 0, 32, c0, c0 + cols));
      std::vector<float> ds;
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t cb = c0 / 8; cb < (c0 + cols) / 8; ++cb) ds.push_back(d.scales[r * 6 + cb]);
      EXPECT_EQ(floats(l.down.weight_scale), ds);
    }
  }
}

TEST(Fp8Weights, BlocksSplitByAFusedPartOrASliceAreRefused) {
  // Block 12: k_proj's 16 rows end inside a block before v's rows start.
  CpuBackend be;
  ModelConfig c = tiny_config();
  c.quantization = blocks(12);
  MemorySource src;
  test::fill_random(c, &src);
  quantise(c, c.quantization, &src);
  auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(error_of(w).find("model.layers.0.self_attn.q_proj.weight: rows [0, 32)"),
            std::string::npos)
      << error_of(w);
  EXPECT_NE(error_of(w).find("12-row FP8 blocks"), std::string::npos) << error_of(w);
}

// A tensor changed by `edit` gives an error containing `want`.
void expect_refused(const QuantizationConfig& q,
                    const std::function<void(MemorySource*, ModelConfig*)>& edit,
                    const std::string& want) {
  CpuBackend be;
  ModelConfig c = tiny_config();
  c.quantization = q;
  MemorySource src;
  test::fill_random(c, &src);
  quantise(c, q, &src);
  edit(&src, &c);
  auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
  ASSERT_FALSE(w.ok()) << want;
  EXPECT_NE(error_of(w).find(want), std::string::npos) << error_of(w);
}

TEST(Fp8Weights, InconsistentCheckpointsAreRefusedNamingTheTensor) {
  const std::string p = "model.layers.1.";
  expect_refused(
      per_channel(),
      [&](MemorySource* s, ModelConfig*) { s->remove(p + "mlp.up_proj.weight_scale"); },
      "tensor " + p + "mlp.up_proj.weight_scale not found");
  expect_refused(
      per_channel(),
      [&](MemorySource* s, ModelConfig*) { s->add(p + "mlp.down_proj.weight_scale", {1}, {0.5f}); },
      "tensor " + p + "mlp.down_proj.weight_scale: expected [32, 1], found [1]");
  expect_refused(
      per_tensor_static(),
      [&](MemorySource* s, ModelConfig*) { s->remove(p + "self_attn.k_proj.input_scale"); },
      "tensor " + p + "self_attn.k_proj.input_scale not found");
  expect_refused(
      per_tensor_static(),
      [&](MemorySource* s, ModelConfig*) {
        s->add(p + "self_attn.o_proj.weight_scale", {}, {-1.0f});
      },
      p + "self_attn.o_proj.weight_scale: scale -1");
  expect_refused(
      per_tensor_static(),
      [&](MemorySource* s, ModelConfig*) {
        s->add(p + "self_attn.o_proj.input_scale", {1}, {0.0f});
      },
      p + "self_attn.o_proj.input_scale: must be positive");
  expect_refused(
      blocks(8),
      [&](MemorySource* s, ModelConfig*) {
        s->add(p + "mlp.gate_proj.weight_scale_inv", {6, 3}, std::vector<float>(18, 1.0f));
      },
      "tensor " + p + "mlp.gate_proj.weight_scale_inv: expected [6, 4], found [6, 3]");
  expect_refused(
      per_channel(),
      [&](MemorySource* s, ModelConfig*) {
        s->add_raw(p + "mlp.down_proj.weight", {32, 47}, DType::kF8E4M3,
                   std::vector<uint8_t>(32 * 47));
      },
      "tensor " + p + "mlp.down_proj.weight: expected [32, 48], found [32, 47]");
  expect_refused(
      per_channel(),
      [&](MemorySource* s, ModelConfig*) {
        s->add(p + "self_attn.v_proj.weight", {16, 32}, std::vector<float>(16 * 32));
      },
      "mix F8_E4M3 and other dtypes");
  expect_refused(
      per_channel(), [&](MemorySource*, ModelConfig* c) { c->quantization = QuantizationConfig(); },
      "is stored as F8_E4M3 but config.json has no quantization_config");
  expect_refused(
      per_channel(),
      [&](MemorySource* s, ModelConfig*) {
        s->add_raw("model.embed_tokens.weight", {97, 32}, DType::kF8E4M3,
                   std::vector<uint8_t>(97 * 32));
      },
      "tensor model.embed_tokens.weight is stored as F8_E4M3; pagoda loads FP8 only");
}

// The online scheme's codes and scales of rows [r0, r1) x columns [c0, c1)
// of bf16 tensors (the parts of one fused weight, in order), one scale per row.
void expect_online_rows(const LinearWeight& w, MemorySource& src,
                        const std::vector<std::tuple<std::string, int64_t, int64_t>>& parts,
                        int64_t k, int64_t c0, int64_t c1) {
  std::vector<uint8_t> want_codes;
  std::vector<float> want_scales;
  for (const auto& [name, r0, r1] : parts) {
    HostTensor t = src.read(name).value();
    for (int64_t r = r0; r < r1; ++r) {
      std::vector<float> row;
      for (int64_t col = c0; col < c1; ++col)
        row.push_back(bf16_to_float(static_cast<const uint16_t*>(t.data)[r * k + col]));
      float amax = 0.0f;
      for (float x : row) amax = std::max(amax, std::fabs(x));
      const float s = std::max(amax / 448.0f, 1.0f / (448.0f * 512.0f));
      want_scales.push_back(s);
      for (float x : row) want_codes.push_back(float_to_e4m3(x / s));
    }
  }
  EXPECT_EQ(bytes(w), want_codes);
  EXPECT_EQ(floats(w.weight_scale), want_scales);
}

TEST(Fp8Weights, OnlineSchemeQuantisesEachRowOfTheRanksSlice) {
  for (int size : {1, 2}) {
    SCOPED_TRACE("tp size " + std::to_string(size));
    CpuBackend be;
    ModelConfig c = tiny_config();
    c.quantization = online_fp8_config();
    MemorySource src;
    test::fill_random(c, &src, 3, DType::kBF16);
    const int rank = size - 1;
    auto w = load_model_weights(*find_architecture(c).value(), c, be, src, TpShard{rank, size});
    ASSERT_TRUE(w.ok()) << error_of(w);
    const LayerWeights& l = w->layers[0];
    EXPECT_FALSE(w->lm_head.is_fp8());
    EXPECT_FALSE(w->embed.dtype == DType::kF8E4M3);
    ASSERT_TRUE(l.down.is_fp8());
    // down [32, 48]: this rank's columns, each row's scale over them.
    const int64_t cols = 48 / size, c0 = rank * cols;
    expect_online_rows(l.down, src, {{"model.layers.0.mlp.down_proj.weight", 0, 32}}, 48, c0,
                       c0 + cols);
    // qkv: this rank's rows of q [32, 32], k and v [16, 32], fused in that order
    // (rows quantised on the thread pool, each into its place).
    ASSERT_TRUE(l.qkv.is_fp8());
    const int64_t q = 32 / size, kv = 16 / size;
    expect_online_rows(l.qkv, src,
                       {{"model.layers.0.self_attn.q_proj.weight", rank * q, (rank + 1) * q},
                        {"model.layers.0.self_attn.k_proj.weight", rank * kv, (rank + 1) * kv},
                        {"model.layers.0.self_attn.v_proj.weight", rank * kv, (rank + 1) * kv}},
                       32, 0, 32);
    EXPECT_TRUE(l.qkv.input_scale.empty());
  }
}

}  // namespace
}  // namespace pagoda
