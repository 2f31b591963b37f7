// AWQ / GPTQ modules through io/int_quant_source.h: packed here independently
// as AutoAWQ / AutoGPTQ pack them (tools/int_quant_pack.py does the same in
// NumPy), then read() must be (q - z) * s for every element, read_blocks()
// the group format that dequantizes (core/block_dequant.h) to the same
// values, and every inconsistency is refused naming the tensor.
#include "io/int_quant_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "core/block_dequant.h"
#include "core/half.h"
#include "io/int_quant_config.h"

namespace pagoda {
namespace {

// Raw tensors by name (f16 / i32 / f32 bytes).
class RawSource final : public IndexedWeightSource {
 public:
  void put(const std::string& name, DType dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes) {
    add_tensor(TensorInfo{name, dtype, std::move(shape), bytes.size(), std::nullopt});
    data_[name] = std::move(bytes);
  }
  Result<HostTensor> read(std::string_view name) override {
    const TensorInfo* t = find(name);
    if (t == nullptr) return make_error(ErrorCode::kNotFound, "no " + std::string(name));
    HostTensor h;
    h.dtype = t->dtype;
    h.shape = t->shape;
    h.data = data_.at(std::string(name)).data();
    return h;
  }
  std::string describe() const override { return "raw"; }

 private:
  std::map<std::string, std::vector<uint8_t>> data_;
};

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One module's quantization: q [K, N], z [K/G, N], s [K/G, N] (f16 bits),
// g_idx [K].
struct Quant {
  int64_t n, k, group;
  int bits;
  std::vector<int> q, z;
  std::vector<uint16_t> s;
  std::vector<int32_t> g_idx;

  float value(int64_t col, int64_t row) const {  // w[n = col, k = row]
    const int64_t g = g_idx[static_cast<size_t>(row)];
    return static_cast<float>(q[static_cast<size_t>(row * n + col)] -
                              z[static_cast<size_t>(g * n + col)]) *
           fp16_to_float(s[static_cast<size_t>(g * n + col)]);
  }
};

Quant random_quant(int64_t n, int64_t k, int64_t group, int bits, bool act_order, int min_zero,
                   std::mt19937_64& gen) {
  Quant m{n, k, group < 0 ? k : group, bits, {}, {}, {}, {}};
  const int maxq = (1 << bits) - 1;
  std::uniform_int_distribution<int> qd(0, maxq), zd(min_zero, maxq);
  std::uniform_real_distribution<float> sd(1e-3f, 0.1f);
  m.q.resize(static_cast<size_t>(k * n));
  for (int& v : m.q) v = qd(gen);
  const int64_t groups = k / m.group;
  m.z.resize(static_cast<size_t>(groups * n));
  for (int& v : m.z) v = zd(gen);
  m.s.resize(m.z.size());
  for (uint16_t& v : m.s) v = float_to_fp16(sd(gen));
  std::vector<int32_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  if (act_order) std::shuffle(perm.begin(), perm.end(), gen);
  m.g_idx.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i)
    m.g_idx[static_cast<size_t>(perm[static_cast<size_t>(i)])] = static_cast<int32_t>(i / m.group);
  return m;
}

// AutoAWQ: column c of each 8 into nibble i where order[i] = c % 8.
std::vector<uint32_t> awq_pack(const std::vector<int>& v, int64_t rows, int64_t cols) {
  constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  std::vector<uint32_t> out(static_cast<size_t>(rows * cols / 8), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c8 = 0; c8 < cols / 8; ++c8)
      for (int i = 0; i < 8; ++i)
        out[static_cast<size_t>(r * (cols / 8) + c8)] |=
            static_cast<uint32_t>(v[static_cast<size_t>(r * cols + c8 * 8 + kOrder[i])]) << (4 * i);
  return out;
}

void add_awq(RawSource& src, const std::string& prefix, const Quant& m) {
  src.put(prefix + ".qweight", DType::kI32, {m.k, m.n / 8}, bytes_of(awq_pack(m.q, m.k, m.n)));
  src.put(prefix + ".qzeros", DType::kI32, {m.k / m.group, m.n / 8},
          bytes_of(awq_pack(m.z, m.k / m.group, m.n)));
  src.put(prefix + ".scales", DType::kF16, {m.k / m.group, m.n}, bytes_of(m.s));
}

// AutoGPTQ: rows of K packed along K; zeros (minus one for v1) along N.
void add_gptq(RawSource& src, const std::string& prefix, const Quant& m, bool v1, bool g_idx) {
  const int per = 32 / m.bits;
  std::vector<uint32_t> qw(static_cast<size_t>(m.k / per * m.n), 0);
  for (int64_t r = 0; r < m.k; ++r)
    for (int64_t c = 0; c < m.n; ++c)
      qw[static_cast<size_t>((r / per) * m.n + c)] |=
          static_cast<uint32_t>(m.q[static_cast<size_t>(r * m.n + c)]) << (m.bits * (r % per));
  const int64_t groups = m.k / m.group;
  std::vector<uint32_t> qz(static_cast<size_t>(groups * m.n / per), 0);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < m.n; ++c)
      qz[static_cast<size_t>(g * (m.n / per) + c / per)] |=
          static_cast<uint32_t>(m.z[static_cast<size_t>(g * m.n + c)] - (v1 ? 1 : 0))
          << (m.bits * (c % per));
  src.put(prefix + ".qweight", DType::kI32, {m.k / per, m.n}, bytes_of(qw));
  src.put(prefix + ".qzeros", DType::kI32, {groups, m.n / per}, bytes_of(qz));
  src.put(prefix + ".scales", DType::kF16, {groups, m.n}, bytes_of(m.s));
  if (g_idx) src.put(prefix + ".g_idx", DType::kI32, {m.k}, bytes_of(m.g_idx));
}

IntQuantConfig config(IntQuantMethod method, int bits, int64_t group, bool desc_act, bool v1) {
  IntQuantConfig c;
  c.method = method;
  c.bits = bits;
  c.group_size = group;
  c.desc_act = desc_act;
  c.zero_plus_one = v1;
  return c;
}

// read() equals the reference everywhere; read_blocks() is `want` and
// dequantizes to the same values.
void expect_module(WeightSource& src, const std::string& name, const Quant& m, DType want) {
  const TensorInfo* info = src.find(name);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->shape, (std::vector<int64_t>{m.n, m.k}));
  ASSERT_TRUE(info->blocks.has_value());
  EXPECT_EQ(*info->blocks, want) << dtype_name(*info->blocks);
  Result<HostTensor> dense = src.read(name);
  ASSERT_TRUE(dense.ok()) << dense.error().message;
  ASSERT_EQ(dense->dtype, DType::kF32);
  const auto* y = static_cast<const float*>(dense->data);
  for (int64_t c = 0; c < m.n; ++c)
    for (int64_t r = 0; r < m.k; ++r)
      ASSERT_EQ(y[c * m.k + r], m.value(c, r)) << name << " n " << c << " k " << r;
  Result<HostTensor> blocks = src.read_blocks(name);
  ASSERT_TRUE(blocks.ok()) << blocks.error().message;
  EXPECT_EQ(blocks->dtype, want);
  EXPECT_EQ(blocks->owned.size(), dtype_nbytes(want, m.n * m.k) + dtype_k_perm_bytes(want, m.k));
  std::vector<float> back(static_cast<size_t>(m.n * m.k));
  dequantize_weight_rows(want, blocks->data, m.n, m.k, 0, m.n, back.data());
  ASSERT_EQ(0, std::memcmp(back.data(), y, back.size() * 4)) << name;
}

TEST(IntQuantSource, AwqUnpacksAsAutoAwqPacks) {
  std::mt19937_64 gen(1);
  for (int64_t group : {32, 64, 128, -1}) {
    const int64_t n = 40, k = 256;
    const Quant m = random_quant(n, k, group, 4, false, 0, gen);
    auto raw = std::make_unique<RawSource>();
    add_awq(*raw, "layer.q_proj", m);
    raw->put("layer.norm.weight", DType::kF32, {2}, std::vector<uint8_t>(8, 0));
    Result<std::unique_ptr<WeightSource>> src =
        wrap_int_quantized(std::move(raw), config(IntQuantMethod::kAwq, 4, group, false, false));
    ASSERT_TRUE(src.ok()) << src.error().message;
    const DType want = group_dtype(4, group == 32 ? 32 : group == 64 ? 64 : 128, false);
    SCOPED_TRACE("group " + std::to_string(group));
    expect_module(**src, "layer.q_proj.weight", m, want);
    EXPECT_NE((*src)->find("layer.norm.weight"), nullptr);  // passes through
    EXPECT_EQ((*src)->find("layer.q_proj.qweight"), nullptr);
    EXPECT_EQ((*src)->find("layer.q_proj.scales"), nullptr);
  }
}

std::string fmt_bits(int bits, int64_t group, bool v1, bool act) {
  return std::to_string(bits) + "-bit group " + std::to_string(group) + (v1 ? " v1" : " v2") +
         (act ? " act-order" : "");
}

TEST(IntQuantSource, GptqEveryVariant) {
  std::mt19937_64 gen(2);
  for (int bits : {4, 8}) {
    for (int64_t group : {32, 128, -1}) {
      for (bool v1 : {true, false}) {
        for (bool act_order : {false, true}) {
          if (group < 0 && act_order) continue;  // one group: no order to permute
          const int64_t n = bits == 4 ? 24 : 12, k = 384;
          // v1 never stores zero 0 (AutoGPTQ's z - 1 would wrap); v2 may.
          const Quant m = random_quant(n, k, group, bits, act_order, v1 ? 1 : 0, gen);
          auto raw = std::make_unique<RawSource>();
          add_gptq(*raw, "m.down_proj", m, v1, /*g_idx=*/true);
          Result<std::unique_ptr<WeightSource>> src = wrap_int_quantized(
              std::move(raw), config(IntQuantMethod::kGptq, bits, group, act_order, v1));
          ASSERT_TRUE(src.ok()) << src.error().message;
          const int64_t g = group < 0 ? k : group;
          const DType want = group_dtype(bits, g % 128 == 0 ? 128 : 32, act_order);
          SCOPED_TRACE(fmt_bits(bits, group, v1, act_order));
          expect_module(**src, "m.down_proj.weight", m, want);
        }
      }
    }
  }
}

// GPTQ v1's stored 2^b - 1 reads as z = 2^b (vLLM's kernels: field + 1).
TEST(IntQuantSource, GptqV1ZeroPlusOneDoesNotWrap) {
  std::mt19937_64 gen(3);
  Quant m = random_quant(8, 32, 32, 4, false, 1, gen);
  for (int& z : m.z) z = 16;  // stored 15
  auto raw = std::make_unique<RawSource>();
  add_gptq(*raw, "p", m, true, false);
  auto src = wrap_int_quantized(std::move(raw), config(IntQuantMethod::kGptq, 4, 32, false, true));
  ASSERT_TRUE(src.ok()) << src.error().message;
  expect_module(**src, "p.weight", m, DType::kW4G32);
}

// Errors name the offending tensor.
void expect_refused(std::unique_ptr<RawSource> raw, const IntQuantConfig& c,
                    const std::string& needle) {
  auto src = wrap_int_quantized(std::move(raw), c);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.error().message.find(needle), std::string::npos) << src.error().message;
}

TEST(IntQuantSource, RefusesInconsistentModules) {
  std::mt19937_64 gen(4);
  const IntQuantConfig gptq = config(IntQuantMethod::kGptq, 4, 32, false, true);
  const Quant m = random_quant(16, 64, 32, 4, false, 1, gen);
  {  // no qzeros
    auto raw = std::make_unique<RawSource>();
    add_gptq(*raw, "a", m, true, true);
    auto only = std::make_unique<RawSource>();
    for (const char* part : {".qweight", ".scales", ".g_idx"}) {
      HostTensor h = *raw->read(std::string("a") + part);
      const auto* p = static_cast<const uint8_t*>(h.data);
      only->put(std::string("a") + part, h.dtype, h.shape,
                std::vector<uint8_t>(p, p + raw->find(std::string("a") + part)->file_bytes));
    }
    expect_refused(std::move(only), gptq, "has no a.qzeros");
  }
  {  // K = 64 is not a multiple of the configured group 128
    auto raw = std::make_unique<RawSource>();
    add_gptq(*raw, "b", m, true, true);
    expect_refused(std::move(raw), config(IntQuantMethod::kGptq, 4, 128, false, true),
                   "tensor b.qweight");
  }
  {  // bits 8 in the config for 4-bit tensors: the scales disagree with qweight
    auto raw = std::make_unique<RawSource>();
    add_gptq(*raw, "c", m, true, true);
    expect_refused(std::move(raw), config(IntQuantMethod::kGptq, 8, 32, false, true), "tensor c.");
  }
  {  // act order without g_idx
    auto raw = std::make_unique<RawSource>();
    add_gptq(*raw, "d", m, true, false);
    expect_refused(std::move(raw), config(IntQuantMethod::kGptq, 4, 32, true, true),
                   "d.g_idx is missing");
  }
  {  // a g_idx whose groups are not of G rows
    Quant bad = m;
    bad.g_idx[0] = 1;
    auto raw = std::make_unique<RawSource>();
    add_gptq(*raw, "e", bad, true, true);
    expect_refused(std::move(raw), gptq, "tensor e.g_idx");
  }
  {  // g_idx out of range
    Quant bad = m;
    bad.g_idx[5] = 7;
    auto raw = std::make_unique<RawSource>();
    add_gptq(*raw, "f", bad, true, true);
    expect_refused(std::move(raw), gptq, "g_idx[5] = 7");
  }
  {  // a module modules_to_not_convert names is quantized
    auto raw = std::make_unique<RawSource>();
    add_awq(*raw, "model.layers.0.mlp.gate_proj", random_quant(16, 64, 32, 4, false, 0, gen));
    IntQuantConfig c = config(IntQuantMethod::kAwq, 4, 32, false, false);
    c.modules_to_not_convert = {"mlp.gate_proj"};
    expect_refused(std::move(raw), c, "modules_to_not_convert");
  }
  {  // f32 scales
    auto raw = std::make_unique<RawSource>();
    raw->put("g.qweight", DType::kI32, {8, 16}, std::vector<uint8_t>(8 * 16 * 4));
    raw->put("g.qzeros", DType::kI32, {2, 2}, std::vector<uint8_t>(16));
    raw->put("g.scales", DType::kF32, {2, 16}, std::vector<uint8_t>(128));
    expect_refused(std::move(raw), gptq, "tensor g.scales");
  }
}

// --- quantization_config ---

Result<std::optional<IntQuantConfig>> parse(const std::string& q) {
  return parse_int_quant_config(R"({"hidden_size": 8, "quantization_config": )" + q + "}",
                                "config.json");
}

TEST(IntQuantConfig, ParsesAwqAndGptq) {
  auto awq = parse(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true,
                       "version": "GEMM", "modules_to_not_convert": ["visual"]})");
  ASSERT_TRUE(awq.ok()) << awq.error().message;
  ASSERT_TRUE(awq->has_value());
  EXPECT_EQ((*awq)->method, IntQuantMethod::kAwq);
  EXPECT_EQ((*awq)->group_size, 128);
  EXPECT_FALSE((*awq)->zero_plus_one);
  EXPECT_EQ((*awq)->modules_to_not_convert, std::vector<std::string>{"visual"});
  auto gptq = parse(R"({"quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": true,
                        "sym": false, "damp_percent": 0.01})");
  ASSERT_TRUE(gptq.ok()) << gptq.error().message;
  EXPECT_EQ((*gptq)->bits, 8);
  EXPECT_EQ((*gptq)->group_size, -1);
  EXPECT_TRUE((*gptq)->desc_act);
  EXPECT_TRUE((*gptq)->zero_plus_one);  // checkpoint_format gptq (v1) by default
  auto v2 = parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 32,
                      "checkpoint_format": "gptq_v2"})");
  ASSERT_TRUE(v2.ok()) << v2.error().message;
  EXPECT_FALSE((*v2)->zero_plus_one);
  EXPECT_EQ(describe(**v2), "gptq 4-bit group 32 (v2 zeros)");
}

TEST(IntQuantConfig, OtherMethodsAndNoneAreNotOurs) {
  auto fp8 = parse(R"({"quant_method": "fp8", "activation_scheme": "dynamic"})");
  ASSERT_TRUE(fp8.ok());
  EXPECT_FALSE(fp8->has_value());
  auto none = parse_int_quant_config(R"({"hidden_size": 8})", "config.json");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(IntQuantConfig, RefusesWhatItCannotHonour) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"quant_method": "gptq", "bits": 3, "group_size": 128})", "bits"},
      {R"({"quant_method": "gptq", "bits": 2, "group_size": 128})", "bits"},
      {R"({"quant_method": "awq", "bits": 8, "group_size": 128})", "bits"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"})", "version"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "marlin"})", "version"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": false})",
       "zero_point"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "marlin"})",
       "checkpoint_format"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "is_marlin_format": true})",
       "is_marlin_format"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 16})", "group_size"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": "yes"})", "desc_act"},
  };
  for (const auto& [json, field] : cases) {
    auto r = parse(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.error().message.find(std::string("quantization_config.") + field),
              std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("config.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace pagoda
