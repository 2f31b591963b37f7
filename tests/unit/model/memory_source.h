// An in-memory WeightSource and a tiny random llama-family model for the
// model unit tests.
#pragma once

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "io/model_config.h"
#include "io/weight_source.h"

namespace pagoda::test {

class MemorySource final : public WeightSource {
 public:
  // Stores `values` as `dtype` (f32, f16 or bf16).
  void add(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values,
           DType dtype = DType::kF32) {
    std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype == DType::kF32) std::memcpy(bytes.data() + 4 * i, &values[i], 4);
      uint16_t h = dtype == DType::kF16 ? float_to_fp16(values[i]) : float_to_bf16(values[i]);
      if (dtype != DType::kF32) std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    infos_.erase(std::remove_if(infos_.begin(), infos_.end(),
                                [&](const TensorInfo& t) { return t.name == name; }),
                 infos_.end());
    infos_.push_back({name, dtype, shape, bytes.size(), std::nullopt});
    data_[name] = std::move(bytes);
  }
  // Stores `bytes` as they are (F8_E4M3 codes: one byte per element).
  void add_raw(const std::string& name, std::vector<int64_t> shape, DType dtype,
               std::vector<uint8_t> bytes) {
    remove(name);
    infos_.push_back({name, dtype, shape, bytes.size(), std::nullopt});
    data_[name] = std::move(bytes);
  }
  void remove(const std::string& name) {
    infos_.erase(std::remove_if(infos_.begin(), infos_.end(),
                                [&](const TensorInfo& t) { return t.name == name; }),
                 infos_.end());
    data_.erase(name);
  }
  // Replaces `parts` (same dtype and trailing dims) by one tensor `name`,
  // their rows stacked in order: a pre-fused checkpoint's tensor.
  void fuse(const std::string& name, const std::vector<std::string>& parts) {
    std::vector<int64_t> shape = find(parts[0])->shape;
    const DType dtype = find(parts[0])->dtype;
    shape[0] = 0;
    std::vector<uint8_t> bytes;
    for (const std::string& p : parts) {
      shape[0] += find(p)->shape[0];
      bytes.insert(bytes.end(), data_.at(p).begin(), data_.at(p).end());
      remove(p);
    }
    remove(name);
    infos_.push_back({name, dtype, shape, bytes.size()});
    data_[name] = std::move(bytes);
  }
  const std::vector<TensorInfo>& tensors() const override { return infos_; }
  const TensorInfo* find(std::string_view name) const override {
    for (const TensorInfo& t : infos_)
      if (t.name == name) return &t;
    return nullptr;
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
  std::string describe() const override { return "memory source"; }

 private:
  std::vector<TensorInfo> infos_;
  std::map<std::string, std::vector<uint8_t>> data_;
};

// A 2-layer GQA llama: hidden 32, 4 heads / 2 kv heads, head_dim 8, vocab 97.
inline ModelConfig tiny_config(const std::string& arch = "llama") {
  ModelConfig c;
  c.architecture = arch;
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.rms_norm_eps = 1e-5;
  c.max_position_embeddings = 128;
  c.dtype = DType::kF32;
  if (arch == "gemma2" || arch == "gemma3") {  // what the config parser sets
    c.gelu_tanh_mlp = c.norm_weight_offset = c.sandwich_norms = c.scale_embeddings = true;
    c.tie_word_embeddings = true;
    c.qk_norm = arch == "gemma3";
    c.query_pre_attn_scalar = 16;
    c.sliding_window = 3;
    c.sliding_layers = {true, false};
    c.attn_logit_softcapping = arch == "gemma2" ? 50.0 : 0.0;
    c.final_logit_softcapping = arch == "gemma2" ? 30.0 : 0.0;
    c.rope_local_base_freq = arch == "gemma3" ? 10000.0 : 0.0;
  }
  return c;
}

// Random weights for every tensor `config` needs (biases when
// attention_bias, q/k norms when qk_norm, sandwich norms when
// sandwich_norms, lm_head unless tied). Phi-3: the same values as for llama,
// with q/k/v and gate/up stored pre-fused (qkv_proj, gate_up_proj).
inline void fill_random(const ModelConfig& c, MemorySource* src, uint32_t seed = 1,
                        DType dtype = DType::kF32) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  auto rnd = [&](std::vector<int64_t> shape, float base = 0.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = base + nd(gen);
    return v;
  };
  const int64_t h = c.hidden_size, d = c.head_dim, q = c.num_heads * d, kv = c.num_kv_heads * d;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float base = 0.0f) {
    src->add(name, shape, rnd(shape, base), dtype);
  };
  add("model.embed_tokens.weight", {c.vocab_size, h});
  add("model.norm.weight", {h}, 1.0f);
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, h});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {h}, 1.0f);
    add(p + "post_attention_layernorm.weight", {h}, 1.0f);
    add(p + "self_attn.q_proj.weight", {q, h});
    add(p + "self_attn.k_proj.weight", {kv, h});
    add(p + "self_attn.v_proj.weight", {kv, h});
    add(p + "self_attn.o_proj.weight", {h, q});
    if (c.attention_bias) {
      add(p + "self_attn.q_proj.bias", {q});
      add(p + "self_attn.k_proj.bias", {kv});
      add(p + "self_attn.v_proj.bias", {kv});
    }
    if (c.qk_norm) {
      add(p + "self_attn.q_norm.weight", {d}, 1.0f);
      add(p + "self_attn.k_norm.weight", {d}, 1.0f);
    }
    if (c.sandwich_norms) {
      add(p + "pre_feedforward_layernorm.weight", {h}, 1.0f);
      add(p + "post_feedforward_layernorm.weight", {h}, 1.0f);
    }
    if (!c.is_moe_layer(l)) {
      add(p + "mlp.gate_proj.weight", {c.intermediate_size, h});
      add(p + "mlp.up_proj.weight", {c.intermediate_size, h});
      add(p + "mlp.down_proj.weight", {h, c.intermediate_size});
      continue;
    }
    // Experts under Hugging Face's Mixtral or Qwen-MoE names.
    const bool mixtral = c.architecture == "mixtral";
    const std::string m = p + (mixtral ? "block_sparse_moe." : "mlp.");
    const int64_t im = c.moe_intermediate_size, is = c.shared_expert_intermediate_size;
    add(m + "gate.weight", {c.num_experts, h});
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      add(x + (mixtral ? "w1.weight" : "gate_proj.weight"), {im, h});
      add(x + (mixtral ? "w3.weight" : "up_proj.weight"), {im, h});
      add(x + (mixtral ? "w2.weight" : "down_proj.weight"), {h, im});
    }
    if (is > 0) {
      add(m + "shared_expert.gate_proj.weight", {is, h});
      add(m + "shared_expert.up_proj.weight", {is, h});
      add(m + "shared_expert.down_proj.weight", {h, is});
      add(m + "shared_expert_gate.weight", {1, h});
    }
  }
  if (c.architecture != "phi3") return;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    src->fuse(p + "self_attn.qkv_proj.weight",
              {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
               p + "self_attn.v_proj.weight"});
    src->fuse(p + "mlp.gate_up_proj.weight",
              {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"});
  }
}

// tiny_config with the mixture-of-experts fields of `arch` (mixtral,
// qwen2_moe or qwen3_moe) as their config parser sets them: 4 experts of
// intermediate 16, top-2; Qwen2-MoE with a shared expert of 24.
inline ModelConfig tiny_moe_config(const std::string& arch) {
  ModelConfig c = tiny_config(arch);
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 16;
  c.norm_topk_prob = arch != "qwen2_moe";
  c.attention_bias = arch == "qwen2_moe";
  c.qk_norm = arch == "qwen3_moe";
  if (arch == "qwen2_moe") c.shared_expert_intermediate_size = 24;
  return c;
}

}  // namespace pagoda::test
