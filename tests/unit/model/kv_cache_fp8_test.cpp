// The FP8 KV cache in the model runner (--kv-cache-dtype fp8): pool sizing
// by the element size, the checkpoint's k/v scales under each naming
// (compressed-tensors, ModelOpt, the older kv_scale) and their refusals,
// and logits close to the f32 cache's.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "memory_source.h"
#include "model/kv_scales.h"
#include "model/model_runner.h"
#include "model_steps.h"

namespace pagoda {
namespace {

using test::MemorySource;
using test::tiny_config;

std::vector<std::string> two_layers() {
  return {"model.layers.0.self_attn.", "model.layers.1.self_attn."};
}

TEST(KvScales, NoneInTheCheckpointIsOne) {
  MemorySource src;
  test::fill_random(tiny_config(), &src);
  Result<LoadedKvScales> s = load_kv_scales(src, two_layers());
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->scales.size(), 2u);
  for (const KvScales& x : s->scales) {
    EXPECT_EQ(x.k, 1.0f);
    EXPECT_EQ(x.v, 1.0f);
  }
  EXPECT_NE(s->source.find("1.0"), std::string::npos) << s->source;
}

TEST(KvScales, ReadsEveryNaming) {
  MemorySource src;
  // compressed-tensors (layer 0, f32 scalar), ModelOpt (layer 1, bf16 [1]).
  src.add("model.layers.0.self_attn.k_scale", {}, {0.5f});
  src.add("model.layers.0.self_attn.v_scale", {}, {0.25f});
  src.add("model.layers.1.self_attn.k_proj.k_scale", {1}, {2.0f}, DType::kBF16);
  src.add("model.layers.1.self_attn.v_proj.v_scale", {1}, {0.125f}, DType::kF16);
  Result<LoadedKvScales> s = load_kv_scales(src, two_layers());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->scales[0].k, 0.5f);
  EXPECT_EQ(s->scales[0].v, 0.25f);
  EXPECT_EQ(s->scales[1].k, 2.0f);
  EXPECT_EQ(s->scales[1].v, 0.125f);
  EXPECT_NE(s->source.find("checkpoint (2 layers)"), std::string::npos) << s->source;

  MemorySource old;  // one kv_scale for both
  old.add("model.layers.0.self_attn.kv_scale", {}, {3.0f});
  old.add("model.layers.1.self_attn.kv_scale", {}, {4.0f});
  s = load_kv_scales(old, two_layers());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->scales[1].k, 4.0f);
  EXPECT_EQ(s->scales[1].v, 4.0f);
}

// Whatever the base of the layers' names; layers without an o_proj (random
// weights) get the HF default.
TEST(KvScales, AttentionPrefixesFollowTheCheckpointsNames) {
  MemorySource src;
  src.add("language_model.model.layers.2.self_attn.o_proj.weight", {1}, {0.0f});
  src.add("language_model.model.layers.3.self_attn.o_proj.weight", {1}, {0.0f});
  src.add("language_model.model.layers.3.self_attn.o_proj.bias", {1}, {0.0f});
  src.add("model.layers.x.self_attn.o_proj.weight", {1}, {0.0f});
  const std::vector<std::string> p = attention_prefixes(src, 2, 3);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], "language_model.model.layers.2.self_attn.");
  EXPECT_EQ(p[1], "language_model.model.layers.3.self_attn.");
  EXPECT_EQ(p[2], "model.layers.4.self_attn.");
}

// Each refusal names the tensor or the layer.
TEST(KvScales, RefusesBadScales) {
  auto error = [](const std::vector<std::pair<std::string, std::vector<float>>>& tensors) {
    MemorySource src;
    for (const auto& [name, values] : tensors)
      src.add(name, values.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{2}, values);
    Result<LoadedKvScales> s = load_kv_scales(src, two_layers());
    EXPECT_FALSE(s.ok());
    return s.ok() ? std::string() : s.error().message;
  };
  const std::string k0 = "model.layers.0.self_attn.k_scale",
                    v0 = "model.layers.0.self_attn.v_scale";
  const std::string k1 = "model.layers.1.self_attn.k_scale",
                    v1 = "model.layers.1.self_attn.v_scale";
  std::string m = error({{k0, {1.0f}}, {v0, {-2.0f}}, {k1, {1.0f}}, {v1, {1.0f}}});
  EXPECT_NE(m.find(v0 + ": a KV-cache scale must be positive"), std::string::npos) << m;
  m = error({{k0, {1.0f}}, {v0, {NAN}}, {k1, {1.0f}}, {v1, {1.0f}}});
  EXPECT_NE(m.find(v0), std::string::npos) << m;
  m = error({{k0, {1.0f, 2.0f}}, {v0, {1.0f}}, {k1, {1.0f}}, {v1, {1.0f}}});
  EXPECT_NE(m.find(k0 + ": a KV-cache scale must be one value"), std::string::npos) << m;
  m = error({{k0, {1.0f}}, {k1, {1.0f}}, {v1, {1.0f}}});  // k without v
  EXPECT_NE(m.find("has " + k0 + " but no v scale"), std::string::npos) << m;
  m = error({{k1, {1.0f}}, {v1, {1.0f}}});  // layer 0 has none
  EXPECT_NE(m.find("1 of 2 layers but none for model.layers.0.self_attn."), std::string::npos) << m;
}

class Fp8RunnerTest : public ::testing::Test {
 protected:
  std::unique_ptr<ModelRunner> make(KvCacheDtype dtype, int64_t kv_bytes = 1 << 20) {
    RunnerOptions o;
    o.block_size = 4;
    o.kv_cache_bytes = kv_bytes;
    o.kv_cache_dtype = dtype;
    auto r = ModelRunner::create(be_, tiny_config(), src_, o);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : nullptr;
  }
  // Logits of a 13-token prefill then three decodes over blocks 3, 0, 5, 1.
  std::vector<float> run(ModelRunner& r) {
    const std::vector<int32_t> table = {3, 0, 5, 1};
    std::vector<int32_t> prompt;
    for (int32_t i = 0; i < 13; ++i) prompt.push_back((i * 29 + 5) % 97);
    std::vector<float> all, logits;
    EXPECT_TRUE(r.execute_logits(test::make_step({{prompt, 0, table}}, 4, 4), &logits).ok());
    all = logits;
    for (int32_t p = 13; p < 16; ++p) {
      EXPECT_TRUE(r.execute_logits(test::make_step({{{p % 97}, p, table}}, 4, 4), &logits).ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  }
  CpuBackend be_;
  MemorySource src_;
};

TEST_F(Fp8RunnerTest, PoolHoldsFourTimesTheF32Tokens) {
  test::fill_random(tiny_config(), &src_);
  auto f32 = make(KvCacheDtype::kAuto);
  auto fp8 = make(KvCacheDtype::kFp8E4M3);
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(fp8, nullptr);
  EXPECT_EQ(f32->kv_cache_dtype(), DType::kF32);
  EXPECT_EQ(fp8->kv_cache_dtype(), DType::kF8E4M3);
  EXPECT_EQ(fp8->kv_block_bytes() * 4, f32->kv_block_bytes());
  EXPECT_EQ(fp8->num_kv_blocks(), 4 * f32->num_kv_blocks());
  EXPECT_TRUE(f32->kv_scales_source().empty());
  EXPECT_NE(fp8->kv_scales_source().find("1.0"), std::string::npos);
}

// Every family (the Gemma decoder's two KV groups, Phi-3's fused
// projections, the mixture of experts) runs with an FP8 cache.
TEST_F(Fp8RunnerTest, EveryFamilyRuns) {
  ModelConfig qwen3 = tiny_config("qwen3");
  qwen3.qk_norm = true;
  for (const ModelConfig& c : {tiny_config("gemma2"), tiny_config("gemma3"), tiny_config("phi3"),
                               qwen3, test::tiny_moe_config("mixtral")}) {
    SCOPED_TRACE(c.architecture);
    MemorySource src;
    test::fill_random(c, &src);
    RunnerOptions o;
    o.block_size = 4;
    o.num_kv_blocks = 16;
    o.sliding_kv_group = true;
    o.kv_cache_dtype = KvCacheDtype::kFp8E4M3;
    auto r = ModelRunner::create(be_, c, src, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ((*r)->kv_cache_dtype(), DType::kF8E4M3);
    std::vector<float> logits;
    StepBatch step = test::make_step({{{5, 7, 9, 11, 13}, 0, {3, 0}}}, 4, 2);
    if ((*r)->num_sliding_kv_blocks() > 0) {
      step.sliding_block_tables = step.block_tables;
      step.sliding_slot_mapping = step.slot_mapping;
    }
    const Status st = (*r)->execute_logits(step, &logits);
    ASSERT_TRUE(st.ok()) << st.error().message;
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST_F(Fp8RunnerTest, RefusesA16BitCacheOnTheF32Backend) {
  test::fill_random(tiny_config(), &src_);
  RunnerOptions o;
  o.kv_cache_dtype = KvCacheDtype::kBF16;
  auto r = ModelRunner::create(be_, tiny_config(), src_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--kv-cache-dtype bf16"), std::string::npos)
      << r.error().message;
}

// With scale 1 the FP8 cache's logits stay near the f32 cache's (e4m3 keeps
// 3 mantissa bits: a relative error up to 2^-4 per k/v element; this random
// model's attention is peaky, so the logits move by a few percent); with
// checkpoint scales of 1e-4 every |k|, |v| > 0.045 saturates, which the
// logits must show, so the scales reach the cache.
TEST_F(Fp8RunnerTest, LogitsNearTheF32CacheAndCheckpointScalesApply) {
  test::fill_random(tiny_config(), &src_);
  auto f32 = make(KvCacheDtype::kAuto);
  auto fp8 = make(KvCacheDtype::kFp8E4M3);
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(fp8, nullptr);
  const std::vector<float> want = run(*f32), got = run(*fp8);
  ASSERT_EQ(want.size(), got.size());
  double max_diff = 0.0, diff2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(want[i] - got[i])));
    diff2 += (want[i] - got[i]) * (want[i] - got[i]);
    ref2 += want[i] * want[i];
  }
  EXPECT_GT(max_diff, 0.0);                 // the cache is quantised
  EXPECT_LT(std::sqrt(diff2 / ref2), 0.1);  // ... and close (rel-L2)
  for (const char* layer : {"model.layers.0.self_attn.", "model.layers.1.self_attn."}) {
    src_.add(std::string(layer) + "k_scale", {}, {1e-4f});
    src_.add(std::string(layer) + "v_scale", {}, {1e-4f});
  }
  auto saturated = make(KvCacheDtype::kFp8E4M3);
  ASSERT_NE(saturated, nullptr);
  EXPECT_NE(saturated->kv_scales_source().find("checkpoint (2 layers)"), std::string::npos);
  const std::vector<float> far = run(*saturated);
  double far2 = 0.0;
  for (size_t i = 0; i < want.size(); ++i) far2 += (want[i] - far[i]) * (want[i] - far[i]);
  EXPECT_GT(far2, 4 * diff2);
}

}  // namespace
}  // namespace pagoda
