// Qwen3: the llama decoder (llama_decoder.h) with per-head RMSNorm on q and k
// (before RoPE), an explicit head_dim that need not equal hidden / heads,
// and q/k/v biases only when config.attention_bias.
#include <string>

#include "model/architecture.h"
#include "model/llama_decoder.h"

namespace pagoda {
namespace {

Status validate_qwen3(const ModelConfig& c) {
  if (!c.qk_norm)
    return make_error(ErrorCode::kInvalidArgument,
                      "model config (qwen3): q/k norms must be enabled");
  return {};
}

LayerTensorNames qwen3_layer_names(const ModelConfig& config, int64_t layer) {
  LayerTensorNames n = llama_layer_names(config, layer);
  const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  n.q_norm = p + "q_norm.weight";
  n.k_norm = p + "k_norm.weight";
  return n;
}

Status load_qwen3(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  return load_llama_decoder(c, qwen3_layer_names, loader, w);
}

}  // namespace

const Architecture& qwen3_architecture() {
  static const Architecture a{"qwen3", validate_qwen3, load_qwen3, llama_forward,
                              qwen3_layer_names};
  return a;
}

}  // namespace pagoda
