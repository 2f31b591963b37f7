// Architecture lookup, config validation and weight loading (fusing, dtype
// conversion, tied embeddings, error messages).
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
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

std::vector<float> host(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

std::vector<float> source_values(MemorySource& src, const std::string& name) {
  HostTensor h = src.read(name).value();
  std::vector<float> v(static_cast<size_t>(h.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t* p16 = static_cast<const uint16_t*>(h.data);
    v[i] = h.dtype == DType::kF32    ? static_cast<const float*>(h.data)[i]
           : h.dtype == DType::kBF16 ? bf16_to_float(p16[i])
                                     : fp16_to_float(p16[i]);
  }
  return v;
}

TEST(Architecture, FindsEverySupportedFamilyAndListsThemOtherwise) {
  for (const char* name : {"llama", "mistral", "qwen2", "phi3"}) {
    ModelConfig c = tiny_config(name);
    auto a = find_architecture(c);
    ASSERT_TRUE(a.ok()) << error_of(a);
    EXPECT_STREQ((*a)->name, name);
  }
  ModelConfig q3 = tiny_config("qwen3");
  q3.qk_norm = true;
  EXPECT_TRUE(find_architecture(q3).ok());
  for (const char* name : {"gemma2", "gemma3"}) {
    auto a = find_architecture(tiny_config(name));
    ASSERT_TRUE(a.ok()) << error_of(a);
    EXPECT_STREQ((*a)->name, name);
  }
  for (const char* name : {"mixtral", "qwen2_moe", "qwen3_moe"}) {
    auto a = find_architecture(test::tiny_moe_config(name));
    ASSERT_TRUE(a.ok()) << error_of(a);
    EXPECT_STREQ((*a)->name, name);
  }
  ModelConfig bad = tiny_config("gpt2");
  auto r = find_architecture(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("\"gpt2\""), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(
                "llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3, mixtral, qwen2_moe, "
                "qwen3_moe"),
            std::string::npos)
      << r.error().message;
}

TEST(Architecture, ValidationNamesTheField) {
  auto expect_field = [](ModelConfig c, const std::string& field) {
    auto r = find_architecture(c);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_NE(r.error().message.find(field), std::string::npos) << r.error().message;
  };
  ModelConfig c = tiny_config();
  c.num_kv_heads = 3;
  expect_field(c, "num_key_value_heads");
  c = tiny_config();
  c.head_dim = 7;
  expect_field(c, "head_dim");
  c = tiny_config();
  c.vocab_size = 0;
  expect_field(c, "vocab_size");
  c = tiny_config();
  c.rms_norm_eps = 0;
  expect_field(c, "rms_norm_eps");
  c = tiny_config("qwen3");  // qwen3 without q/k norms
  expect_field(c, "q/k norms");
  c = tiny_config("llama");
  c.qk_norm = true;
  expect_field(c, "q/k norms");
  c = tiny_config("gemma3");
  c.qk_norm = false;
  expect_field(c, "model config (gemma3): q/k norms");
  c = tiny_config("gemma2");
  c.sliding_layers = {true};
  expect_field(c, "model config (gemma2): sliding_layers");
  c = tiny_config("gemma2");
  c.sliding_window = 0;
  expect_field(c, "sliding_window");
  c = tiny_config("gemma3");
  c.rope_local_base_freq = 0;
  expect_field(c, "rope_local_base_freq");
  for (const char* moe : {"mixtral", "qwen2_moe", "qwen3_moe"}) {
    c = test::tiny_moe_config(moe);
    c.num_experts_per_tok = 5;  // of 4 experts
    expect_field(c, "num_experts_per_tok");
  }
  c = test::tiny_moe_config("qwen2_moe");
  c.shared_expert_intermediate_size = 0;
  expect_field(c, "shared_expert_intermediate_size");
  c = test::tiny_moe_config("qwen3_moe");
  c.qk_norm = false;
  expect_field(c, "q/k norms");
  c = tiny_config("phi3");
  c.attention_bias = true;
  expect_field(c, "model config (phi3): Phi-3 has no q/k/v biases");
  c = tiny_config("phi3");
  c.sliding_layers = {true};
  expect_field(c, "model config (phi3): sliding_layers");
}

TEST(LoadWeights, StacksTheExpertsGateThenUpPerExpert) {
  CpuBackend be;
  for (const char* arch : {"mixtral", "qwen2_moe"}) {
    const ModelConfig c = test::tiny_moe_config(arch);
    const bool mixtral = std::string(arch) == "mixtral";
    MemorySource src;
    test::fill_random(c, &src);
    auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
    ASSERT_TRUE(w.ok()) << error_of(w);
    const LayerWeights& l = w->layers[1];
    const std::string m = mixtral ? "model.layers.1.block_sparse_moe." : "model.layers.1.mlp.";
    ASSERT_EQ(l.experts_gate_up.ndim, 3);
    EXPECT_EQ(l.experts_gate_up.dim(0), 4);
    EXPECT_EQ(l.experts_gate_up.dim(1), 32);
    EXPECT_EQ(l.experts_down.dim(1), 32);
    EXPECT_EQ(l.experts_down.dim(2), 16);
    std::vector<float> gate_up, down;
    for (int e = 0; e < 4; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      for (const char* part : {mixtral ? "w1" : "gate_proj", mixtral ? "w3" : "up_proj"}) {
        auto v = source_values(src, x + part + ".weight");
        gate_up.insert(gate_up.end(), v.begin(), v.end());
      }
      auto v = source_values(src, x + (mixtral ? "w2" : "down_proj") + ".weight");
      down.insert(down.end(), v.begin(), v.end());
    }
    EXPECT_EQ(host(l.experts_gate_up), gate_up) << arch;
    EXPECT_EQ(host(l.experts_down), down) << arch;
    EXPECT_EQ(host(l.router), source_values(src, m + "gate.weight")) << arch;
    EXPECT_EQ(l.shared_gate_up.empty(), mixtral) << arch;
    EXPECT_TRUE(l.gate_up.empty()) << arch;
  }
  // Mixtral under the Qwen-style names loads the same experts.
  const ModelConfig c = test::tiny_moe_config("mixtral");
  MemorySource mixtral, renamed;
  test::fill_random(c, &mixtral);
  ModelConfig as_qwen = c;
  as_qwen.architecture = "qwen3_moe";  // fill_random's Qwen names; same shapes and seed
  as_qwen.qk_norm = false;
  test::fill_random(as_qwen, &renamed);
  auto a = load_model_weights(*find_architecture(c).value(), c, be, mixtral);
  auto b = load_model_weights(*find_architecture(c).value(), c, be, renamed);
  ASSERT_TRUE(a.ok() && b.ok()) << error_of(b);
  EXPECT_EQ(host(a->layers[0].experts_gate_up), host(b->layers[0].experts_gate_up));
  EXPECT_EQ(host(a->layers[1].experts_down), host(b->layers[1].experts_down));
}


// Gemma's HF files store RMSNorm weights as w of (1 + w): the loader folds
// the 1 in (every norm, q/k norms too); GGUF files (norm_weight_offset
// false) already hold 1 + w.
TEST(LoadWeights, GemmaNormsGetOnePlusW) {
  CpuBackend be;
  for (bool offset : {true, false}) {
    ModelConfig c = tiny_config("gemma3");
    c.norm_weight_offset = offset;
    MemorySource src;
    test::fill_random(c, &src);
    auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
    ASSERT_TRUE(w.ok()) << error_of(w);
    const float add = offset ? 1.0f : 0.0f;
    auto expect_plus = [&](const Tensor& t, const std::string& name) {
      std::vector<float> want = source_values(src, name);
      for (float& x : want) x += add;
      EXPECT_EQ(host(t), want) << name;
    };
    const LayerWeights& l = w->layers[1];
    const std::string p = "model.layers.1.";
    expect_plus(l.input_norm, p + "input_layernorm.weight");
    expect_plus(l.post_attn_norm, p + "post_attention_layernorm.weight");
    expect_plus(l.pre_ff_norm, p + "pre_feedforward_layernorm.weight");
    expect_plus(l.post_ff_norm, p + "post_feedforward_layernorm.weight");
    expect_plus(l.q_norm, p + "self_attn.q_norm.weight");
    expect_plus(l.k_norm, p + "self_attn.k_norm.weight");
    expect_plus(w->final_norm, "model.norm.weight");
    EXPECT_EQ(host(l.qkv).front(), source_values(src, p + "self_attn.q_proj.weight").front());
    EXPECT_EQ(w->lm_head.data, w->embed.data);  // tied
  }
}

// A Gemma3ForConditionalGeneration checkpoint: the language model's tensors
// under either prefix transformers has used; the vision tower's are ignored.
TEST(LoadWeights, GemmaFromAnImageTextCheckpointsLanguageModel) {
  CpuBackend be;
  const ModelConfig c = tiny_config("gemma3");
  MemorySource plain;
  test::fill_random(c, &plain);
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    MemorySource src;
    for (const TensorInfo& t : plain.tensors())
      src.add(prefix + t.name.substr(std::string("model.").size()), t.shape,
              source_values(plain, t.name), DType::kF32);
    src.add("vision_tower.vision_model.post_layernorm.weight", {3}, {1, 2, 3}, DType::kF32);
    auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
    ASSERT_TRUE(w.ok()) << prefix << ": " << error_of(w);
    std::vector<float> want =
        source_values(plain, "model.layers.1.post_feedforward_layernorm.weight");
    for (float& x : want) x += 1.0f;
    EXPECT_EQ(host(w->layers[1].post_ff_norm), want) << prefix;
    EXPECT_EQ(host(w->embed), source_values(plain, "model.embed_tokens.weight")) << prefix;
  }
}

TEST(LoadWeights, FusesQkvAndGateUpInOrder) {
  CpuBackend be;
  ModelConfig c = tiny_config("qwen2");
  c.attention_bias = true;
  MemorySource src;
  test::fill_random(c, &src);
  auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
  ASSERT_TRUE(w.ok()) << error_of(w);
  ASSERT_EQ(w->layers.size(), 2u);
  const LayerWeights& l = w->layers[1];
  EXPECT_EQ(l.qkv.dim(0), (4 + 2 * 2) * 8);
  EXPECT_EQ(l.qkv.dim(1), 32);
  std::vector<float> want;
  for (const char* part : {"q", "k", "v"}) {
    auto v = source_values(src, std::string("model.layers.1.self_attn.") + part + "_proj.weight");
    want.insert(want.end(), v.begin(), v.end());
  }
  EXPECT_EQ(host(l.qkv), want);
  want.clear();
  for (const char* part : {"q", "k", "v"}) {
    auto v = source_values(src, std::string("model.layers.1.self_attn.") + part + "_proj.bias");
    want.insert(want.end(), v.begin(), v.end());
  }
  EXPECT_EQ(host(l.qkv_bias), want);
  want = source_values(src, "model.layers.1.mlp.gate_proj.weight");
  auto up = source_values(src, "model.layers.1.mlp.up_proj.weight");
  want.insert(want.end(), up.begin(), up.end());
  EXPECT_EQ(host(l.gate_up), want);
  EXPECT_EQ(l.gate_up.dim(0), 2 * 48);
  EXPECT_TRUE(l.q_norm.empty());
  EXPECT_EQ(host(l.down), source_values(src, "model.layers.1.mlp.down_proj.weight"));
  EXPECT_NE(w->lm_head.data, w->embed.data);
}

// Phi-3's qkv_proj / gate_up_proj hold the rows llama's separate tensors
// do: loading either gives the same device tensors, whole and per
// tensor-parallel rank (each rank's rows of q, k, v, gate and up).
TEST(LoadWeights, Phi3PreFusedTensorsLoadAsTheSeparateOnes) {
  CpuBackend be;
  ModelConfig llama = tiny_config("llama"), phi3 = tiny_config("phi3");
  MemorySource split, fused;
  test::fill_random(llama, &split, 7);
  test::fill_random(phi3, &fused, 7);
  ASSERT_EQ(fused.find("model.layers.0.self_attn.q_proj.weight"), nullptr);
  ASSERT_EQ(fused.find("model.layers.0.self_attn.qkv_proj.weight")->shape,
            (std::vector<int64_t>{(4 + 2 * 2) * 8, 32}));
  ASSERT_EQ(fused.find("model.layers.0.mlp.gate_up_proj.weight")->shape,
            (std::vector<int64_t>{2 * 48, 32}));
  for (const TpShard shard : {TpShard{0, 1}, TpShard{0, 2}, TpShard{1, 2}}) {
    auto a = load_model_weights(*find_architecture(llama).value(), llama, be, split, shard);
    auto b = load_model_weights(*find_architecture(phi3).value(), phi3, be, fused, shard);
    ASSERT_TRUE(a.ok()) << error_of(a);
    ASSERT_TRUE(b.ok()) << error_of(b);
    for (size_t l = 0; l < a->layers.size(); ++l) {
      SCOPED_TRACE("rank " + std::to_string(shard.rank) + "/" + std::to_string(shard.size) +
                   " layer " + std::to_string(l));
      const LayerWeights &x = a->layers[l], &y = b->layers[l];
      EXPECT_EQ(y.qkv.dim(0), x.qkv.dim(0));
      EXPECT_EQ(host(y.qkv), host(x.qkv));
      EXPECT_EQ(host(y.gate_up), host(x.gate_up));
      EXPECT_EQ(host(y.o_proj), host(x.o_proj));
      EXPECT_EQ(host(y.down), host(x.down));
      EXPECT_TRUE(y.qkv_bias.empty());
    }
  }
  // A wrong fused shape names the tensor.
  fused.add("model.layers.1.mlp.gate_up_proj.weight", {48, 32}, std::vector<float>(48 * 32));
  auto bad = load_model_weights(*find_architecture(phi3).value(), phi3, be, fused);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("model.layers.1.mlp.gate_up_proj.weight"), std::string::npos)
      << bad.error().message;
}

TEST(LoadWeights, ConvertsHalfTypesToF32) {
  CpuBackend be;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    ModelConfig c = tiny_config("qwen3");
    c.qk_norm = true;
    MemorySource src;
    test::fill_random(c, &src, 3, dt);
    auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
    ASSERT_TRUE(w.ok()) << error_of(w);
    EXPECT_EQ(w->embed.dtype, DType::kF32);
    EXPECT_EQ(host(w->embed), source_values(src, "model.embed_tokens.weight"));
    EXPECT_EQ(host(w->layers[0].k_norm),
              source_values(src, "model.layers.0.self_attn.k_norm.weight"));
  }
}

TEST(LoadWeights, TiesLmHeadWhenAbsentOrConfigured) {
  CpuBackend be;
  ModelConfig c = tiny_config();
  MemorySource src;
  test::fill_random(c, &src);
  src.remove("lm_head.weight");
  auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
  ASSERT_TRUE(w.ok()) << error_of(w);
  EXPECT_EQ(w->lm_head.data, w->embed.data);
  c.tie_word_embeddings = true;
  test::fill_random(c, &src);
  src.add("lm_head.weight", {97, 32}, std::vector<float>(97 * 32, 5.0f));  // ignored when tied
  auto w2 = load_model_weights(*find_architecture(c).value(), c, be, src);
  ASSERT_TRUE(w2.ok()) << error_of(w2);
  EXPECT_EQ(w2->lm_head.data, w2->embed.data);
}

TEST(LoadWeights, ErrorsNameTheTensor) {
  CpuBackend be;
  ModelConfig c = tiny_config();
  MemorySource src;
  test::fill_random(c, &src);
  src.add("model.layers.1.self_attn.k_proj.weight", {8, 32}, std::vector<float>(8 * 32));
  auto w = load_model_weights(*find_architecture(c).value(), c, be, src);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message,
            "tensor model.layers.1.self_attn.k_proj.weight: expected [16, 32], found [8, 32]");

  test::fill_random(c, &src);
  src.remove("model.layers.0.mlp.up_proj.weight");
  w = load_model_weights(*find_architecture(c).value(), c, be, src);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(w.error().message,
            "tensor model.layers.0.mlp.up_proj.weight not found in memory source");

  ModelConfig biased = tiny_config("qwen2");  // qwen2 always needs biases
  test::fill_random(tiny_config(), &src);
  w = load_model_weights(*find_architecture(biased).value(), biased, be, src);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("self_attn.q_proj.bias not found"), std::string::npos)
      << w.error().message;
}

}  // namespace
}  // namespace pagoda
