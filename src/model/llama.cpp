// Llama (1/2/3, SmolLM, TinyLlama, ...): the llama decoder (llama_decoder.h)
// with the standard tensor names; q/k/v biases when config.attention_bias,
// no q/k norms.
#include "model/architecture.h"
#include "model/llama_decoder.h"

namespace pagoda {
namespace {

Status validate_llama(const ModelConfig& c) {
  if (c.qk_norm)
    return make_error(ErrorCode::kUnsupported, "model config (" + c.architecture +
                                                   "): q/k norms are not part of this family");
  return {};
}

Status load_llama(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  return load_llama_decoder(c, llama_layer_names, loader, w);
}

}  // namespace

const Architecture& llama_architecture() {
  static const Architecture a{"llama", validate_llama, load_llama, llama_forward,
                              llama_layer_names};
  return a;
}

}  // namespace pagoda
