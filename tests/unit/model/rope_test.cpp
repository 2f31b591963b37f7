// Rope tables against transformers' rotary embedding
// (tests/data/golden/rope_tables.json from tools/make_golden.py).
#include "model/rope.h"

#include "io/gguf.h"
#include "io/gguf_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace pagoda {
namespace {

using nlohmann::json;

ModelConfig config_from(const json& c) {
  ModelConfig m;
  m.head_dim = c.at("head_dim");
  m.max_position_embeddings = c.at("max_position_embeddings");
  const json& p = c.at("rope_parameters");
  m.rope_theta = p.at("rope_theta");
  const std::string type = p.at("rope_type");
  RopeScaling& s = m.rope_scaling;
  s.type = type == "linear"   ? RopeScalingType::kLinear
           : type == "llama3" ? RopeScalingType::kLlama3
           : type == "yarn"   ? RopeScalingType::kYarn
                              : RopeScalingType::kDefault;
  s.factor = p.value("factor", 1.0);
  s.low_freq_factor = p.value("low_freq_factor", 1.0);
  s.high_freq_factor = p.value("high_freq_factor", 4.0);
  s.original_max_position_embeddings = p.value("original_max_position_embeddings", int64_t{0});
  s.beta_fast = p.value("beta_fast", 32.0);
  s.beta_slow = p.value("beta_slow", 1.0);
  if (p.contains("attention_factor")) s.attention_factor = p.at("attention_factor").get<double>();
  s.mscale = p.value("mscale", 0.0);
  s.mscale_all_dim = p.value("mscale_all_dim", 0.0);
  return m;
}

TEST(Rope, MatchesTransformers) {
  std::ifstream f(std::filesystem::path(PAGODA_SOURCE_DIR) / "tests/data/golden/rope_tables.json");
  ASSERT_TRUE(f.good());
  const json doc = json::parse(f);
  ASSERT_GE(doc.at("cases").size(), 5u);
  for (const auto& [name, c] : doc.at("cases").items()) {
    SCOPED_TRACE(name);
    auto freqs = rope_frequencies(config_from(c));
    ASSERT_TRUE(freqs.ok()) << freqs.error().message;
    const auto ref_inv = c.at("inv_freq").get<std::vector<double>>();
    ASSERT_EQ(freqs->inv_freq.size(), ref_inv.size());
    for (size_t i = 0; i < ref_inv.size(); ++i)
      ASSERT_NEAR(freqs->inv_freq[i], ref_inv[i], 2.5e-7 * ref_inv[i]) << "inv_freq " << i;
    EXPECT_NEAR(freqs->attention_factor, double(c.at("attention_factor")), 1e-6);

    const auto positions = c.at("positions").get<std::vector<int64_t>>();
    const int64_t half = static_cast<int64_t>(ref_inv.size()), d = 2 * half;
    const std::vector<float> table = rope_cos_sin_table(*freqs, 256);
    std::vector<float> row(static_cast<size_t>(d));
    for (size_t k = 0; k < positions.size(); ++k) {
      const int64_t p = positions[k];
      rope_cos_sin_row(*freqs, p, row.data());
      if (p < 256) {
        for (int64_t i = 0; i < d; ++i) ASSERT_EQ(table[p * d + i], row[i]) << "table row " << p;
      }
      for (int64_t i = 0; i < half; ++i) {
        // cos/sin of f32 angles: exact when inv_freq agrees bit for bit;
        // otherwise the angle may differ by p * |d inv_freq|.
        const double tol = 3e-7 + freqs->attention_factor * static_cast<double>(p) *
                                      std::abs(freqs->inv_freq[i] - ref_inv[i]);
        ASSERT_NEAR(row[i], double(c.at("cos")[k][i]), tol) << "cos p=" << p << " i=" << i;
        ASSERT_NEAR(row[half + i], double(c.at("sin")[k][i]), tol) << "sin p=" << p << " i=" << i;
      }
    }
  }
}

TEST(Rope, RejectsBadParameters) {
  ModelConfig c;
  c.head_dim = 64;
  c.rope_theta = 10000;
  c.max_position_embeddings = 4096;
  c.rope_scaling.type = RopeScalingType::kLinear;
  c.rope_scaling.factor = 0;
  auto r = rope_frequencies(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("factor"), std::string::npos);
  c.rope_scaling.type = RopeScalingType::kLlama3;
  c.rope_scaling.factor = 8;
  r = rope_frequencies(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("original_max_position_embeddings"), std::string::npos);
  c.rope_scaling.type = RopeScalingType::kDefault;
  c.head_dim = 63;
  EXPECT_FALSE(rope_frequencies(c).ok());
  c.head_dim = 64;
  c.rope_freq_factors.assign(31, 1.0f);  // needs 32
  r = rope_frequencies(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("rope_freqs.weight"), std::string::npos) << r.error().message;
  c.rope_freq_factors.assign(32, 1.0f);
  c.rope_freq_factors[3] = 0.0f;
  EXPECT_FALSE(rope_frequencies(c).ok());
}

// longrope (Phi-3.5's shape: 131072 positions over an original 4096):
// inv_freq = 1 / (factor_i * theta^(2i/D)), the long factors once
// max_model_len passes the original context, and cos / sin scaled by
// sqrt(1 + ln(32) / ln(4096)) unless attention_factor is given.
TEST(Rope, LongropePicksTheFactorSetByMaxModelLen) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000;
  c.max_position_embeddings = 131072;
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::kLongrope;
  s.original_max_position_embeddings = 4096;
  s.factor = 32;  // what the parsers set: 131072 / 4096
  s.short_factor = {1.0f, 1.5f, 2.0f, 3.0f};
  s.long_factor = {2.0f, 4.0f, 8.0f, 16.0f};
  const double scale = std::sqrt(1.0 + std::log(32.0) / std::log(4096.0));  // 1.19023807...
  auto expect_freqs = [&](int64_t max_model_len, const std::vector<float>& ext) {
    SCOPED_TRACE("max_model_len " + std::to_string(max_model_len));
    auto f = rope_frequencies(c, max_model_len);
    ASSERT_TRUE(f.ok()) << f.error().message;
    ASSERT_EQ(f->inv_freq.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      const double want = 1.0 / (ext[i] * std::pow(10000.0, 2.0 * i / 8.0));
      EXPECT_NEAR(f->inv_freq[i], want, 2.5e-7 * want) << "pair " << i;
    }
    EXPECT_FLOAT_EQ(f->attention_factor, static_cast<float>(scale));
    std::vector<float> row(8);
    rope_cos_sin_row(*f, 1000, row.data());
    EXPECT_NEAR(row[0], std::cos(1000.0 / ext[0]) * scale, 1e-4);
    EXPECT_NEAR(row[4], std::sin(1000.0 / ext[0]) * scale, 1e-4);
  };
  expect_freqs(4096, s.short_factor);
  expect_freqs(100, s.short_factor);
  expect_freqs(4097, s.long_factor);
  expect_freqs(0, s.long_factor);  // 0: max_position_embeddings
  s.attention_factor = 1.5;
  auto f = rope_frequencies(c, 4096);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->attention_factor, 1.5f);
  s.attention_factor.reset();
  s.factor = 1.0;  // no extension: no scaling of cos and sin
  EXPECT_EQ(rope_frequencies(c, 4096)->attention_factor, 1.0f);
}

TEST(Rope, LongropeRejectsBadFactorLists) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000;
  c.max_position_embeddings = 8192;
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::kLongrope;
  s.original_max_position_embeddings = 4096;
  s.short_factor = {1, 1, 1};  // needs 4
  s.long_factor = {1, 1, 1, 1};
  auto expect_error = [&](const std::string& what) {
    auto r = rope_frequencies(c);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
  };
  expect_error("short_factor has 3 values, expected head_dim / 2 = 4");
  s.short_factor = {1, 1, 1, 1};
  s.long_factor = {1, 1, 0, 1};
  expect_error("long_factor values must be positive");
  s.long_factor = {1, 1, 1, 1};
  s.original_max_position_embeddings = 0;
  expect_error("original_max_position_embeddings");
  s.original_max_position_embeddings = 4096;
  EXPECT_TRUE(rope_frequencies(c).ok());
}

// Phi-4-mini's partial rotary embedding (head_dim 128, rotary_dim 96):
// transformers computes inv_freq over dim = rotary_dim (theta^(2i/96), 48
// pairs), longrope's factor lists have rotary_dim / 2 values, and the table
// rows are rotary_dim wide.
TEST(Rope, PartialRotaryTablesCoverRotaryDim) {
  ModelConfig c;
  c.head_dim = 128;
  c.rotary_dim = 96;
  c.rope_theta = 10000;
  c.max_position_embeddings = 131072;
  auto f = rope_frequencies(c);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ(f->inv_freq.size(), 48u);
  for (size_t i = 0; i < 48; ++i) {
    const double want = 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(i) / 96.0);
    EXPECT_NEAR(f->inv_freq[i], want, 2.5e-7 * want) << "pair " << i;
  }
  EXPECT_EQ(rope_cos_sin_table(*f, 5).size(), 5u * 96u);
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::kLongrope;
  s.original_max_position_embeddings = 4096;
  s.factor = 32;
  s.short_factor.assign(48, 1.0f);
  s.long_factor.assign(48, 3.0f);
  f = rope_frequencies(c, 8192);  // the long factors
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ(f->inv_freq.size(), 48u);
  const double last = 1.0 / (3.0 * std::pow(10000.0, 94.0 / 96.0));
  EXPECT_NEAR(f->inv_freq[47], last, 2.5e-7 * last);  // f32
  s.long_factor.assign(64, 3.0f);  // head_dim / 2: the full-rotary count
  auto r = rope_frequencies(c, 8192);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("long_factor has 64 values, expected rotary_dim / 2 = 48"),
            std::string::npos)
      << r.error().message;
  s = RopeScaling{};
  for (int64_t bad : {95, 130, -2}) {
    c.rotary_dim = bad;
    r = rope_frequencies(c);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("rotary_dim must be even and in [0, head_dim 128]"),
              std::string::npos)
        << r.error().message;
  }
}

// A Llama 3.x GGUF stores llama3 rope scaling as rope_freqs.weight (written
// by tools/gguf_fixtures.py with convert_hf_to_gguf.py's formula): read
// through the GGUF config, its frequencies equal those of the llama3 rope
// type with the same parameters.
TEST(Rope, GgufRopeFreqsEqualLlama3Scaling) {
  const std::filesystem::path dir = std::filesystem::path(PAGODA_SOURCE_DIR) / "tests/data/io";
  auto file = GgufFile::open((dir / "llama3_tiny.gguf").string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto from_gguf = gguf_model_config(**file);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().message;
  EXPECT_EQ(from_gguf->rope_scaling.type, RopeScalingType::kDefault);
  ASSERT_EQ(from_gguf->rope_freq_factors.size(), static_cast<size_t>(from_gguf->head_dim / 2));

  std::ifstream f(dir / "llama3_tiny.json");
  const json rope = json::parse(f).at("rope");
  EXPECT_EQ(from_gguf->rope_freq_factors, rope.at("factors").get<std::vector<float>>());
  ModelConfig llama3;
  llama3.head_dim = from_gguf->head_dim;
  llama3.rope_theta = rope.at("rope_theta");
  llama3.rope_scaling.type = RopeScalingType::kLlama3;
  llama3.rope_scaling.factor = rope.at("factor");
  llama3.rope_scaling.low_freq_factor = rope.at("low_freq_factor");
  llama3.rope_scaling.high_freq_factor = rope.at("high_freq_factor");
  llama3.rope_scaling.original_max_position_embeddings = rope.at("original_max_position_embeddings");
  EXPECT_EQ(from_gguf->rope_theta, llama3.rope_theta);

  auto got = rope_frequencies(*from_gguf);
  auto want = rope_frequencies(llama3);
  ASSERT_TRUE(got.ok() && want.ok());
  auto plain = llama3;
  plain.rope_scaling.type = RopeScalingType::kDefault;
  const auto unscaled = rope_frequencies(plain);
  ASSERT_EQ(got->inv_freq.size(), want->inv_freq.size());
  int scaled = 0;
  for (size_t i = 0; i < got->inv_freq.size(); ++i) {
    EXPECT_NEAR(got->inv_freq[i], want->inv_freq[i], 2e-7 * want->inv_freq[i]) << "pair " << i;
    scaled += want->inv_freq[i] != unscaled->inv_freq[i] ? 1 : 0;
  }
  EXPECT_GE(scaled, 2);  // the fixture really scales (the smoothed pair and the long ones)
}

}  // namespace
}  // namespace pagoda
