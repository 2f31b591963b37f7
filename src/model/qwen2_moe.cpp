// Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): the mixture-of-experts
// decoder (moe_decoder.h) with qwen2 attention (q/k/v biases) and, in the
// MoE layers, top-k of E experts (renormalised only with norm_topk_prob)
// plus a shared expert of shared_expert_intermediate_size whose output is
// scaled by sigmoid(shared_expert_gate(x)). decoder_sparse_step /
// mlp_only_layers select dense layers (the llama MLP of intermediate_size).
#include "model/architecture.h"
#include "model/llama_decoder.h"
#include "model/moe_decoder.h"

namespace pagoda {
namespace {

Status validate_qwen2_moe(const ModelConfig& c) {
  if (c.num_experts < 1 || c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts ||
      c.moe_intermediate_size < 1 || c.shared_expert_intermediate_size < 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "model config (qwen2_moe): num_experts, num_experts_per_tok (at most "
                      "num_experts), moe_intermediate_size and shared_expert_intermediate_size "
                      "must be positive");
  if (c.qk_norm)
    return make_error(ErrorCode::kUnsupported,
                      "model config (qwen2_moe): q/k norms are not part of this family");
  return {};
}

Status load_qwen2_moe(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  return load_moe_decoder(c, {llama_layer_names, qwen_moe_names}, loader, w);
}

}  // namespace

const Architecture& qwen2_moe_architecture() {
  static const Architecture a{"qwen2_moe", validate_qwen2_moe, load_qwen2_moe, moe_forward,
                              llama_layer_names, qwen_moe_names};
  return a;
}

}  // namespace pagoda
