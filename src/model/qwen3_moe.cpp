// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): the mixture-of-experts decoder
// (moe_decoder.h) with qwen3 attention (per-head q/k RMSNorm before RoPE,
// explicit head_dim, biases only with attention_bias) and, in the MoE
// layers, top-k of E experts renormalised with norm_topk_prob; no shared
// expert. decoder_sparse_step / mlp_only_layers select dense layers.
#include <string>

#include "model/architecture.h"
#include "model/llama_decoder.h"
#include "model/moe_decoder.h"

namespace pagoda {
namespace {

Status validate_qwen3_moe(const ModelConfig& c) {
  if (c.num_experts < 1 || c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts ||
      c.moe_intermediate_size < 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "model config (qwen3_moe): num_experts, num_experts_per_tok (at most "
                      "num_experts) and moe_intermediate_size must be positive");
  if (!c.qk_norm)
    return make_error(ErrorCode::kInvalidArgument,
                      "model config (qwen3_moe): q/k norms must be enabled");
  if (c.shared_expert_intermediate_size != 0)
    return make_error(ErrorCode::kUnsupported,
                      "model config (qwen3_moe): a shared expert is not part of this family");
  return {};
}

LayerTensorNames qwen3_moe_layer_names(const ModelConfig& config, int64_t layer) {
  LayerTensorNames n = llama_layer_names(config, layer);
  const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  n.q_norm = p + "q_norm.weight";
  n.k_norm = p + "k_norm.weight";
  return n;
}

Status load_qwen3_moe(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  return load_moe_decoder(c, {qwen3_moe_layer_names, qwen_moe_names}, loader, w);
}

}  // namespace

const Architecture& qwen3_moe_architecture() {
  static const Architecture a{"qwen3_moe", validate_qwen3_moe, load_qwen3_moe, moe_forward,
                              qwen3_moe_layer_names, qwen_moe_names};
  return a;
}

}  // namespace pagoda
