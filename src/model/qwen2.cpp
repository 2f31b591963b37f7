// Qwen2 / Qwen2.5: the llama decoder (llama_decoder.h) with q/k/v biases
// (always present), no q/k norms.
#include "model/architecture.h"
#include "model/llama_decoder.h"

namespace pagoda {
namespace {

Status validate_qwen2(const ModelConfig& c) {
  if (c.qk_norm)
    return make_error(ErrorCode::kUnsupported,
                      "model config (qwen2): q/k norms are not part of this family");
  return {};
}

LayerTensorNames qwen2_layer_names(const ModelConfig& config, int64_t layer) {
  ModelConfig with_bias = config;
  with_bias.attention_bias = true;
  return llama_layer_names(with_bias, layer);
}

Status load_qwen2(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  return load_llama_decoder(c, qwen2_layer_names, loader, w);
}

}  // namespace

const Architecture& qwen2_architecture() {
  static const Architecture a{"qwen2", validate_qwen2, load_qwen2, llama_forward,
                              qwen2_layer_names};
  return a;
}

}  // namespace pagoda
