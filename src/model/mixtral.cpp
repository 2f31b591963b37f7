// Mixtral (8x7B, 8x22B): the mixture-of-experts decoder (moe_decoder.h) with
// llama attention (no biases, no q/k norms) and a sparse MLP in every layer:
// top-k (2) of E (8) experts, weights renormalised (norm_topk_prob is always
// set for this family), no shared expert. Hugging Face names
// "model.layers.N.block_sparse_moe.gate.weight" and
// "...block_sparse_moe.experts.{e}.w1 / w3 / w2.weight" (gate, up, down), or
// the Qwen-style MoE names of moe_decoder.h.
// config.sliding_window caps max_model_len as for mistral.
#include <string>

#include "model/architecture.h"
#include "model/llama_decoder.h"
#include "model/moe_decoder.h"

namespace pagoda {
namespace {

Status validate_mixtral(const ModelConfig& c) {
  if (c.num_experts < 1 || c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts ||
      c.moe_intermediate_size < 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "model config (mixtral): num_local_experts and num_experts_per_tok must be "
                      "positive, num_experts_per_tok at most num_local_experts");
  if (!c.norm_topk_prob || c.shared_expert_intermediate_size != 0 || c.qk_norm ||
      c.decoder_sparse_step != 1 || !c.mlp_only_layers.empty())
    return make_error(ErrorCode::kUnsupported,
                      "model config (mixtral): every layer is sparse with renormalised top-k "
                      "weights, without shared expert or q/k norms");
  return {};
}

MoeTensorNames mixtral_moe_names(const ModelConfig& c, int64_t layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".block_sparse_moe.";
  MoeTensorNames n;
  n.router = p + "gate.weight";
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string x = p + "experts." + std::to_string(e) + ".";
    n.expert_gate.push_back(x + "w1.weight");
    n.expert_up.push_back(x + "w3.weight");
    n.expert_down.push_back(x + "w2.weight");
  }
  return n;
}

// Mixtral's own names, or the Qwen-style ones (mlp.gate, mlp.experts.{e}.
// gate_proj / up_proj / down_proj) when the file has those instead.
Status load_mixtral(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  const int64_t first = stage_layers(c, loader).begin;
  const bool qwen_names = !loader.has(mixtral_moe_names(c, first).router) &&
                          loader.has(qwen_moe_names(c, first).router);
  return load_moe_decoder(c, {llama_layer_names, qwen_names ? qwen_moe_names : mixtral_moe_names},
                          loader, w);
}

}  // namespace

const Architecture& mixtral_architecture() {
  // Dummy weights use Mixtral's own names.
  static const Architecture a{"mixtral",         validate_mixtral,  load_mixtral,
                              moe_forward,       llama_layer_names, mixtral_moe_names};
  return a;
}

}  // namespace pagoda
