// The FP8 producer path (RunnerOptions::fp8_producer, blocks.h): the norms
// and silu_mul write the codes of FP8 linears with dynamic per-token
// activations. On the CPU backend the logits must be bit-identical with the
// path on and off, for the tiny FP8 checkpoints (dynamic: the path runs;
// static and block-wise: it must stay out of the way) and the online scheme.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "io/hf_config.h"
#include "io/quantization_config.h"
#include "io/safetensors.h"
#include "memory_source.h"
#include "model/model_runner.h"
#include "model_steps.h"

namespace pagoda {
namespace {

// Logits of a 13-token prefill and a second sequence's 5, then three decode
// steps of both (two rows each), with the path on or off.
std::vector<float> run(const ModelConfig& c, WeightSource& src, bool producer) {
  CpuBackend be;
  RunnerOptions o;
  o.block_size = 4;
  o.kv_cache_bytes = 1 << 22;
  o.max_model_len = 64;
  o.fp8_producer = producer;
  auto r = ModelRunner::create(be, c, src, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return {};
  const std::vector<int32_t> a_table = {3, 0, 5, 1}, b_table = {2, 4, 6, 7};
  std::vector<int32_t> a, b;
  for (int32_t i = 0; i < 13; ++i) a.push_back((i * 29 + 5) % 97);
  for (int32_t i = 0; i < 5; ++i) b.push_back((i * 13 + 2) % 97);
  std::vector<float> all, logits;
  EXPECT_TRUE((*r)->execute_logits(test::make_step({{a, 0, a_table}, {b, 0, b_table}}, 4, 4),
                                   &logits).ok());
  all = logits;
  for (int32_t p = 0; p < 3; ++p) {
    const int32_t tok = (p * 7 + 3) % 97;
    EXPECT_TRUE((*r)->execute_logits(
        test::make_step({{{tok}, 13 + p, a_table}, {{tok}, 5 + p, b_table}}, 4, 4), &logits).ok());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

void expect_same_bits(const std::vector<float>& on, const std::vector<float>& off) {
  ASSERT_FALSE(on.empty());
  ASSERT_EQ(on.size(), off.size());
  EXPECT_EQ(0, std::memcmp(on.data(), off.data(), on.size() * sizeof(float)));
}

class Fp8ProducerCheckpoint : public ::testing::TestWithParam<const char*> {};

TEST_P(Fp8ProducerCheckpoint, LogitsAreBitIdenticalWithAndWithoutThePath) {
  const std::string dir = std::string(PAGODA_TEST_DATA) + "/models/" + GetParam();
  auto c = load_hf_config(dir + "/config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  if (std::ifstream modelopt(dir + "/hf_quant_config.json"); modelopt) {  // tiny_fp8_static
    const std::string text((std::istreambuf_iterator<char>(modelopt)), {});
    auto q = parse_hf_quant_config(text, dir + "/hf_quant_config.json");
    ASSERT_TRUE(q.ok()) << q.error().message;
    c->quantization = *q;
  }
  auto src = open_safetensors_folder(dir);
  ASSERT_TRUE(src.ok()) << src.error().message;
  const std::vector<float> on = run(*c, **src, true);
  const std::vector<float> off = run(*c, **src, false);
  expect_same_bits(on, off);
}

INSTANTIATE_TEST_SUITE_P(TinyFp8, Fp8ProducerCheckpoint,
                         ::testing::Values("tiny_fp8_dynamic", "tiny_fp8_static",
                                           "tiny_fp8_block"));

TEST(Fp8Producer, OnlineSchemeLogitsAreBitIdenticalWithAndWithoutThePath) {
  ModelConfig c = test::tiny_config();
  c.quantization = online_fp8_config();
  test::MemorySource src;
  test::fill_random(c, &src, 5, DType::kBF16);
  expect_same_bits(run(c, src, true), run(c, src, false));
}

}  // namespace
}  // namespace pagoda
