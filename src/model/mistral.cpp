// Mistral (7B v0.1-v0.3, Mistral Nemo, ...): the llama decoder
// (llama_decoder.h) with the standard tensor names; q/k/v biases when
// config.attention_bias (the config parser never sets it for mistral), no q/k
// norms. config.sliding_window: ModelRunner caps max_model_len to it
// (sliding-window attention is not implemented; within the window it equals
// full attention).
#include "model/architecture.h"
#include "model/llama_decoder.h"

namespace pagoda {
namespace {

Status validate_mistral(const ModelConfig& c) {
  if (c.qk_norm)
    return make_error(ErrorCode::kUnsupported, "model config (" + c.architecture +
                                                   "): q/k norms are not part of this family");
  return {};
}

Status load_mistral(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  return load_llama_decoder(c, llama_layer_names, loader, w);
}

}  // namespace

const Architecture& mistral_architecture() {
  static const Architecture a{"mistral", validate_mistral, load_mistral, llama_forward,
                              llama_layer_names};
  return a;
}

}  // namespace pagoda
