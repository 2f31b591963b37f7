// config.json / generation_config.json parsing for each supported family,
// rope scaling variants (transformers 4 and 5 styles) and error cases.
#include "io/hf_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io_test_util.h"

namespace pagoda {
namespace {

using Json = nlohmann::json;

// A minimal valid Llama config; tests patch fields into it.
Json llama_base() {
  return Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})");
}

Result<ModelConfig> parse(const Json& j) {
  return parse_hf_config(j.dump(), "/models/x/config.json");
}

ModelConfig parse_ok(const Json& j) {
  auto r = parse(j);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : ModelConfig{};
}

void expect_error(const Json& j, const std::string& fragment,
                  ErrorCode code = ErrorCode::kInvalidArgument) {
  auto r = parse(j);
  ASSERT_FALSE(r.ok()) << j.dump();
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(fragment), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("/models/x/config.json"), std::string::npos)
      << r.error().message;
}

TEST(HfConfig, Llama) {
  ModelConfig c = parse_ok(llama_base());
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hf_architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kDefault);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
}

// An EAGLE-3 head's config.json (engine/eagle_head.h) reads as a Llama's,
// keeping its own architecture name and ignoring its EAGLE-3 fields.
TEST(HfConfig, Eagle3HeadIsALlama) {
  Json j = llama_base();
  j["architectures"] = {"LlamaForCausalLMEagle3"};
  j["num_hidden_layers"] = 1;
  j["draft_vocab_size"] = 32000;
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hf_architecture, "LlamaForCausalLMEagle3");
  EXPECT_EQ(c.num_layers, 1);
  EXPECT_EQ(c.vocab_size, 128256);
}

TEST(HfConfig, DefaultsAndNulls) {
  Json j = llama_base();
  j.erase("num_key_value_heads");
  j.erase("rms_norm_eps");
  j.erase("rope_theta");
  j.erase("tie_word_embeddings");
  j.erase("torch_dtype");
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = 2;
  j["head_dim"] = nullptr;
  j["rope_scaling"] = nullptr;
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, std::nullopt);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
}

TEST(HfConfig, ExplicitHeadDimAndDtypes) {
  Json j = llama_base();
  j["head_dim"] = 64;
  j["torch_dtype"] = "float32";
  EXPECT_EQ(parse_ok(j).head_dim, 64);
  EXPECT_EQ(parse_ok(j).dtype, DType::kF32);
  j.erase("torch_dtype");
  j["dtype"] = "float16";  // transformers 5 spelling
  EXPECT_EQ(parse_ok(j).dtype, DType::kF16);
}

TEST(HfConfig, Mistral) {
  Json j = llama_base();
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 4096;
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.architecture, "mistral");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_FALSE(c.attention_bias);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(parse_ok(j).sliding_window, 0);
}

TEST(HfConfig, Qwen2) {
  Json j = llama_base();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["sliding_window"] = 32768;
  j["use_sliding_window"] = false;
  j["tie_word_embeddings"] = true;
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 0);
  j["use_sliding_window"] = true;
  EXPECT_EQ(parse_ok(j).sliding_window, 32768);
}

TEST(HfConfig, Qwen3) {
  Json j = llama_base();
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["head_dim"] = 128;
  j["hidden_size"] = 2048;
  j["num_attention_heads"] = 16;
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.architecture, "qwen3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  j["attention_bias"] = true;
  EXPECT_TRUE(parse_ok(j).attention_bias);
}

// google/gemma-2-2b's config.json.
Json gemma2_base() {
  return Json::parse(R"({
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
    "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "head_dim": 256,
    "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 2304, "intermediate_size": 9216, "max_position_embeddings": 8192,
    "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "sliding_window": 4096, "vocab_size": 256000, "torch_dtype": "float32",
    "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0})");
}

// google/gemma-3-270m's config.json (layer_types written out).
Json gemma3_base() {
  Json j = Json::parse(R"({
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
    "attention_bias": false, "attn_logit_softcapping": null, "final_logit_softcapping": null,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 640,
    "intermediate_size": 2048, "max_position_embeddings": 32768, "num_attention_heads": 4,
    "num_hidden_layers": 18, "num_key_value_heads": 1, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_scaling": null,
    "rope_theta": 1000000.0, "sliding_window": 512, "torch_dtype": "bfloat16",
    "use_bidirectional_attention": false, "vocab_size": 262144,
    "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0})");
  for (int i = 0; i < 18; ++i)
    j["layer_types"].push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  return j;
}

TEST(HfConfig, Gemma2) {
  ModelConfig c = parse_ok(gemma2_base());
  EXPECT_EQ(c.architecture, "gemma2");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_TRUE(c.gelu_tanh_mlp && c.norm_weight_offset && c.sandwich_norms && c.scale_embeddings);
  EXPECT_TRUE(c.tie_word_embeddings);  // Gemma2Config's default
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.query_pre_attn_scalar, 256);
  EXPECT_EQ(c.attn_logit_softcapping, 50.0);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.rope_local_base_freq, 0);
  ASSERT_EQ(c.sliding_layers.size(), 26u);
  for (size_t i = 0; i < 26; ++i) EXPECT_EQ(c.sliding_layers[i], i % 2 == 0) << i;
  // Absent fields take Gemma2Config's defaults; null turns a capping off.
  Json j = gemma2_base();
  for (const char* k : {"head_dim", "query_pre_attn_scalar", "attn_logit_softcapping",
                        "hidden_activation", "sliding_window"})
    j.erase(k);
  j["final_logit_softcapping"] = nullptr;
  c = parse_ok(j);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.query_pre_attn_scalar, 256);
  EXPECT_EQ(c.attn_logit_softcapping, 50.0);
  EXPECT_EQ(c.final_logit_softcapping, 0.0);
  EXPECT_EQ(c.sliding_window, 4096);
  j = gemma2_base();
  j["hidden_activation"] = "gelu";
  expect_error(j, "hidden_activation 'gelu'", ErrorCode::kUnsupported);
}

TEST(HfConfig, Gemma3) {
  ModelConfig c = parse_ok(gemma3_base());
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.attn_logit_softcapping, 0.0);
  EXPECT_EQ(c.final_logit_softcapping, 0.0);
  EXPECT_EQ(c.rope_theta, 1000000.0);
  EXPECT_EQ(c.rope_local_base_freq, 10000.0);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_EQ(c.head_dim, 256);  // not 640 / 4
  ASSERT_EQ(c.sliding_layers.size(), 18u);
  for (size_t i = 0; i < 18; ++i) EXPECT_EQ(c.sliding_layers[i], (i + 1) % 6 != 0) << i;
  // Without layer_types: sliding_window_pattern (default 6).
  Json j = gemma3_base();
  j.erase("layer_types");
  j["sliding_window_pattern"] = 3;
  c = parse_ok(j);
  for (size_t i = 0; i < 18; ++i) EXPECT_EQ(c.sliding_layers[i], (i + 1) % 3 != 0) << i;
  j.erase("sliding_window_pattern");
  j.erase("rope_theta");
  j.erase("rope_local_base_freq");
  c = parse_ok(j);
  for (size_t i = 0; i < 18; ++i) EXPECT_EQ(c.sliding_layers[i], (i + 1) % 6 != 0) << i;
  EXPECT_EQ(c.rope_theta, 1000000.0);  // Gemma3TextConfig's defaults
  EXPECT_EQ(c.rope_local_base_freq, 10000.0);
  // rope_scaling applies to the global layers (rope_theta).
  j = gemma3_base();
  j["rope_scaling"] = Json::parse(R"({"rope_type": "linear", "factor": 8.0})");
  c = parse_ok(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  // transformers 5: rope_parameters per layer type.
  j = gemma3_base();
  j.erase("rope_theta");
  j.erase("rope_local_base_freq");
  j.erase("rope_scaling");
  j["rope_parameters"] = Json::parse(R"({
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})");
  c = parse_ok(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c.rope_theta, 1000000.0);
  EXPECT_EQ(c.rope_local_base_freq, 10000.0);
  j["rope_parameters"]["sliding_attention"]["rope_type"] = "linear";
  j["rope_parameters"]["sliding_attention"]["factor"] = 2.0;
  expect_error(j, "rope_parameters");
  j = gemma3_base();
  j["layer_types"].erase(0);
  expect_error(j, "layer_types");
  j = gemma3_base();
  j["use_bidirectional_attention"] = true;
  expect_error(j, "use_bidirectional_attention", ErrorCode::kUnsupported);
}

// google/gemma-3-4b-it's config.json (vision_config abridged): the language
// model's fields in text_config, the others at Gemma3TextConfig's defaults.
TEST(HfConfig, Gemma3ImageTextCheckpointsLanguageModel) {
  Json j = Json::parse(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "boi_token_index": 255999, "eoi_token_index": 256000, "eos_token_id": [1, 106],
    "image_token_index": 262144, "mm_tokens_per_image": 256,
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}})");
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.hf_architecture, "Gemma3ForConditionalGeneration");
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.num_layers, 34);
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c.rope_local_base_freq, 10000.0);
  EXPECT_TRUE(c.qk_norm && c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 106}));
  ASSERT_EQ(c.sliding_layers.size(), 34u);
  EXPECT_FALSE(c.sliding_layers[5]);
  EXPECT_TRUE(c.sliding_layers[6]);
  j.erase("text_config");
  expect_error(j, "text_config");
}

TEST(HfConfig, Mixtral) {
  Json j = llama_base();
  j["architectures"] = {"MixtralForCausalLM"};
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["sliding_window"] = nullptr;
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.architecture, "mixtral");
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 14336);  // each expert is intermediate_size wide
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.shared_expert_intermediate_size, 0);
  for (int64_t l = 0; l < c.num_layers; ++l) EXPECT_TRUE(c.is_moe_layer(l));
  j["num_experts_per_tok"] = 9;
  expect_error(j, "num_experts_per_tok");
  j.erase("num_local_experts");
  expect_error(j, "num_local_experts");
}

TEST(HfConfig, Qwen2Moe) {
  Json j = llama_base();
  j["architectures"] = {"Qwen2MoeForCausalLM"};
  j["num_experts"] = 60;
  j["num_experts_per_tok"] = 4;
  j["moe_intermediate_size"] = 1408;
  j["shared_expert_intermediate_size"] = 5632;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.architecture, "qwen2_moe");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.norm_topk_prob);  // transformers' default
  EXPECT_EQ(c.moe_intermediate_size, 1408);
  EXPECT_EQ(c.shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_FALSE(c.is_moe_layer(3));  // mlp_only_layers
  EXPECT_TRUE(c.is_moe_layer(5));
  j["norm_topk_prob"] = true;
  EXPECT_TRUE(parse_ok(j).norm_topk_prob);
  j["mlp_only_layers"] = {32};
  expect_error(j, "mlp_only_layers");
  j["mlp_only_layers"] = Json::array();
  j.erase("shared_expert_intermediate_size");
  expect_error(j, "shared_expert_intermediate_size");
}

TEST(HfConfig, Qwen3Moe) {
  Json j = llama_base();
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["num_experts"] = 128;
  j["num_experts_per_tok"] = 8;
  j["moe_intermediate_size"] = 768;
  j["norm_topk_prob"] = true;
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.architecture, "qwen3_moe");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.shared_expert_intermediate_size, 0);
  // transformers 5's Qwen3MoeConfig saves num_local_experts.
  j.erase("num_experts");
  j["num_local_experts"] = 64;
  EXPECT_EQ(parse_ok(j).num_experts, 64);
  j.erase("num_local_experts");
  expect_error(j, "num_experts");
  j["num_experts"] = 128;
  j.erase("moe_intermediate_size");
  expect_error(j, "moe_intermediate_size");
}

TEST(HfConfig, ModelTypeWhenArchitecturesAbsent) {
  Json j = llama_base();
  j.erase("architectures");
  j["model_type"] = "qwen2";
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.hf_architecture, "Qwen2ForCausalLM");
}

TEST(HfConfig, RopeScalingVariants) {
  Json j = llama_base();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);

  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  c = parse_ok(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);

  j["rope_scaling"] = {
      {"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  c = parse_ok(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_EQ(c.rope_scaling.attention_factor, std::nullopt);

  j["rope_scaling"] = {{"rope_type", "yarn"},  {"factor", 2.0},           {"beta_fast", 16},
                       {"beta_slow", 2},       {"attention_factor", 1.5}, {"mscale", 0.707},
                       {"mscale_all_dim", 1.0}};
  c = parse_ok(j);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 131072);  // max_position_embeddings
  EXPECT_EQ(c.rope_scaling.beta_fast, 16.0);
  EXPECT_EQ(c.rope_scaling.beta_slow, 2.0);
  EXPECT_EQ(c.rope_scaling.attention_factor, 1.5);
  EXPECT_EQ(c.rope_scaling.mscale, 0.707);
  EXPECT_EQ(c.rope_scaling.mscale_all_dim, 1.0);

  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse_ok(j).rope_scaling.type, RopeScalingType::kDefault);
}

TEST(HfConfig, Transformers5RopeParameters) {
  Json j = llama_base();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  ModelConfig c = parse_ok(j);
  EXPECT_EQ(c.rope_theta, 1000000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kDefault);

  j["rope_parameters"] = {{"rope_theta", 500000.0},  {"rope_type", "llama3"},
                          {"factor", 32.0},          {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  c = parse_ok(j);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
}

// microsoft/Phi-3.5-mini-instruct's config.json as published.
TEST(HfConfig, Phi35Mini) {
  auto r = load_hf_config(testing::data_path("phi3.5_mini_config.json"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelConfig& c = *r;
  EXPECT_EQ(c.architecture, "phi3");
  EXPECT_EQ(c.hf_architecture, "Phi3ForCausalLM");
  EXPECT_EQ(c.hidden_size, 3072);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 96);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FALSE(c.attention_bias || c.qk_norm || c.tie_word_embeddings);
  const RopeScaling& s = c.rope_scaling;
  EXPECT_EQ(s.type, RopeScalingType::kLongrope);
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_EQ(s.factor, 32.0);
  EXPECT_FALSE(s.attention_factor.has_value());
  ASSERT_EQ(s.short_factor.size(), 48u);
  ASSERT_EQ(s.long_factor.size(), 48u);
  EXPECT_EQ(s.short_factor[1], 1.0199999809265137f);
  EXPECT_EQ(s.long_factor[47], 64.83999633789062f);
  // sliding_window 262144 is beyond the context: no layer is masked by it.
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_TRUE(c.sliding_layers.empty());
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{32000});
}

TEST(HfConfig, Phi3Variants) {
  auto phi = [] {
    return Json::parse(R"({
      "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 32064,
      "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 4,
      "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
      "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
      "rope_scaling": null, "sliding_window": 2047, "attention_bias": false})");
  };
  // Phi-3-mini-4k: no rope scaling, every layer masked by its 2047 window.
  ModelConfig c = parse_ok(phi());
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kDefault);
  EXPECT_EQ(c.sliding_window, 2047);
  EXPECT_EQ(c.sliding_layers, std::vector<bool>(4, true));
  // The old name "su"; a rope_scaling original context and attention_factor.
  Json j = phi();
  j.erase("original_max_position_embeddings");
  j["max_position_embeddings"] = 16384;
  const Json ones = std::vector<double>(48, 1.0);  // head_dim 96 / 2
  std::vector<double> rising(48);
  for (size_t i = 0; i < rising.size(); ++i) rising[i] = 1.0 + static_cast<double>(i);
  j["rope_scaling"] = {{"type", "su"},
                       {"short_factor", ones},
                       {"long_factor", rising},
                       {"original_max_position_embeddings", 2048},
                       {"attention_factor", 1.25}};
  c = parse_ok(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLongrope);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 2048);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.attention_factor, 1.25);
  EXPECT_EQ(c.rope_scaling.long_factor[47], 48.0f);
  // No original context anywhere: transformers takes max_position_embeddings
  // and rope_scaling.factor.
  j["rope_scaling"] = {
      {"rope_type", "longrope"}, {"short_factor", ones}, {"long_factor", ones}, {"factor", 4.0}};
  c = parse_ok(j);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 16384);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);
  // Refused: a missing, malformed or mis-sized factor list.
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", ones}};
  expect_error(j, "missing required field 'long_factor'");
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", ones}, {"long_factor", "x"}};
  expect_error(j, "'long_factor' must be a non-empty list of numbers");
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, 2.0}}, {"long_factor", ones}};
  expect_error(j, "rope_scaling.short_factor has 2 values, expected head_dim / 2 = 48");
  j = phi();
  j["sliding_window"] = nullptr;
  EXPECT_TRUE(parse_ok(j).sliding_layers.empty());
}

// Phi-4-mini-instruct's rope: head_dim 128, partial_rotary_factor 0.75 ->
// rotary_dim 96, longrope with 48 short / long factors (rotary_dim / 2).
TEST(HfConfig, Phi4MiniPartialRotary) {
  auto phi4 = [] {
    Json j = Json::parse(R"({
      "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 200064,
      "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
      "num_attention_heads": 24, "num_key_value_heads": 8, "max_position_embeddings": 131072,
      "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
      "partial_rotary_factor": 0.75, "sliding_window": 262144, "tie_word_embeddings": true})");
    j["rope_scaling"] = {{"type", "longrope"},
                         {"short_factor", std::vector<double>(48, 1.0)},
                         {"long_factor", std::vector<double>(48, 2.0)}};
    return j;
  };
  ModelConfig c = parse_ok(phi4());
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rotary_dim, 96);
  EXPECT_EQ(c.rope_dim(), 96);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLongrope);
  EXPECT_EQ(c.rope_scaling.short_factor.size(), 48u);
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.sliding_layers.empty());  // the window is longer than the context
  // head_dim / 2 factors (the full-rotary count) name the rotary dims.
  Json j = phi4();
  j["rope_scaling"]["short_factor"] = std::vector<double>(64, 1.0);
  expect_error(j,
               "rope_scaling.short_factor has 64 values, expected rotary_dim (head_dim 128 * "
               "partial_rotary_factor) / 2 = 48");
  // transformers 5: the factor inside rope_parameters, which overrides the top level.
  j = phi4();
  j.erase("partial_rotary_factor");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "longrope"},
                          {"rope_theta", 10000.0},
                          {"partial_rotary_factor", 0.75},
                          {"short_factor", std::vector<double>(48, 1.0)},
                          {"long_factor", std::vector<double>(48, 2.0)}};
  EXPECT_EQ(parse_ok(j).rotary_dim, 96);
  j["partial_rotary_factor"] = 0.75;  // both places: they must agree
  EXPECT_EQ(parse_ok(j).rotary_dim, 96);
  j["partial_rotary_factor"] = 0.5;
  expect_error(j, "(rope_parameters): partial_rotary_factor 0.75 turns 96 dims, but the top-level "
                  "partial_rotary_factor turns 64");
  // transformers' int() truncation: 128 * 0.7 = 89.6 -> 89, odd: refused.
  j = phi4();
  j["partial_rotary_factor"] = 0.7;
  expect_error(j, "partial_rotary_factor 0.7 turns 89 of head_dim 128 dims");
  for (double bad : {0.0, -0.5, 1.5}) {
    j["partial_rotary_factor"] = bad;
    expect_error(j, "field 'partial_rotary_factor' must be in (0, 1]");
  }
  j["partial_rotary_factor"] = "0.75";
  expect_error(j, "field 'partial_rotary_factor' must be a number");
  // 1.0 (and null) is the full rotary embedding: 64 factors again.
  j = phi4();
  j["partial_rotary_factor"] = nullptr;
  j["rope_scaling"]["short_factor"] = std::vector<double>(64, 1.0);
  j["rope_scaling"]["long_factor"] = std::vector<double>(64, 1.0);
  EXPECT_EQ(parse_ok(j).rope_dim(), 128);
  j["partial_rotary_factor"] = 1.0;
  EXPECT_EQ(parse_ok(j).rope_dim(), 128);
}

// Only phi3 runs a partial rotary embedding: another family's factor is
// refused naming the field and the family, in either place.
TEST(HfConfig, PartialRotaryRefusedOutsidePhi3) {
  Json j = llama_base();
  j["partial_rotary_factor"] = 0.5;
  expect_error(j, "partial_rotary_factor 0.5 is not supported for llama", ErrorCode::kUnsupported);
  j["partial_rotary_factor"] = 1.0;
  EXPECT_EQ(parse_ok(j).rope_dim(), parse_ok(j).head_dim);
  j["rope_parameters"] = {{"rope_type", "default"},
                          {"partial_rotary_factor", 0.25}};  // transformers 5
  expect_error(j, "(rope_parameters): partial_rotary_factor 0.25 is not supported for llama",
               ErrorCode::kUnsupported);
  // Families pagoda does not load (GPT-NeoX, StableLM, Phi-2 style) stop at the architecture.
  j = llama_base();
  j["architectures"] = {"StableLmForCausalLM"};
  j["model_type"] = "stablelm";
  j["partial_rotary_factor"] = 0.25;
  expect_error(j, "unsupported architecture StableLmForCausalLM", ErrorCode::kUnsupported);
}

TEST(HfConfig, Errors) {
  Json j = llama_base();
  j["architectures"] = {"GPT2LMHeadModel"};
  expect_error(j, "GPT2LMHeadModel", ErrorCode::kUnsupported);
  expect_error(j, "Qwen3ForCausalLM", ErrorCode::kUnsupported);  // lists the supported ones
  for (const char* field : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "max_position_embeddings"}) {
    Json k = llama_base();
    k.erase(field);
    expect_error(k, std::string("missing required field '") + field + "'");
  }
  j = llama_base();
  j["hidden_size"] = "4096";
  expect_error(j, "'hidden_size' must be");
  j = llama_base();
  j["num_key_value_heads"] = 5;
  expect_error(j, "num_key_value_heads");
  j = llama_base();
  j["hidden_size"] = 4095;
  expect_error(j, "multiple of num_attention_heads");
  j = llama_base();
  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  expect_error(j, "'dynamic'", ErrorCode::kUnsupported);
  j["rope_scaling"] = {{"type", "llama3"}, {"factor", 8.0}};
  expect_error(j, "low_freq_factor");
  j["rope_scaling"] = {{"type", "linear"}};
  expect_error(j, "factor");
  j = llama_base();
  j["torch_dtype"] = "int8";
  expect_error(j, "torch_dtype");
  j = llama_base();
  j["eos_token_id"] = "x";
  expect_error(j, "eos_token_id");
  j = llama_base();
  j["mlp_bias"] = true;
  expect_error(j, "mlp_bias", ErrorCode::kUnsupported);
  j = llama_base();
  j["hidden_act"] = "gelu";
  expect_error(j, "gelu", ErrorCode::kUnsupported);
  auto r = parse_hf_config("{not json", "/models/x/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kCorrupt);
  r = load_hf_config("/nonexistent/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent/config.json"), std::string::npos);
}

TEST(HfConfig, Stories260K) {
  const std::string path = testing::shared_path("models/stories260K/config.json");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "absent: " << path;
  auto c = load_hf_config(path);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->intermediate_size, 172);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->dtype, DType::kF32);
}

TEST(GenerationConfig, Fields) {
  auto g =
      parse_generation_config(R"({"do_sample": true, "temperature": 0.6, "top_p": 0.9, "top_k": 20,
    "min_p": 0.05, "repetition_penalty": 1.1, "max_new_tokens": 512, "eos_token_id": [1, 2]})",
                              "generation_config.json");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->temperature, 0.6);
  EXPECT_EQ(g->top_p, 0.9);
  EXPECT_EQ(g->top_k, 20);
  EXPECT_EQ(g->min_p, 0.05);
  EXPECT_EQ(g->repetition_penalty, 1.1);
  EXPECT_EQ(g->max_new_tokens, 512);
  EXPECT_EQ(g->eos_token_ids, (std::vector<int32_t>{1, 2}));
  g = parse_generation_config(R"({"bos_token_id": 1, "eos_token_id": 2})",
                              "generation_config.json");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->temperature, std::nullopt);
  EXPECT_EQ(g->top_k, std::nullopt);
  EXPECT_EQ(g->eos_token_ids, std::vector<int32_t>{2});
  g = parse_generation_config(R"({"temperature": "hot"})", "generation_config.json");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("temperature"), std::string::npos);
  EXPECT_NE(g.error().message.find("generation_config.json"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
