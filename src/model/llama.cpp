// Llama (1/2/3, SmolLM, TinyLlama, ...) and Mistral: the plain decoder, with
// q/k/v biases when config.attention_bias says so.
#include <string>

#include "model/architecture.h"

namespace pagoda {
namespace {

Status validate_llama(const ModelConfig& c) {
  if (c.qk_norm)
    return make_error(ErrorCode::kUnsupported, "model config (" + c.architecture +
                                                   "): q/k norms are not part of this family");
  return {};
}

}  // namespace

LayerTensorNames llama_layer_names(const ModelConfig& config, int64_t layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerTensorNames n;
  n.input_norm = p + "input_layernorm.weight";
  n.q_proj = p + "self_attn.q_proj.weight";
  n.k_proj = p + "self_attn.k_proj.weight";
  n.v_proj = p + "self_attn.v_proj.weight";
  if (config.attention_bias) {
    n.q_bias = p + "self_attn.q_proj.bias";
    n.k_bias = p + "self_attn.k_proj.bias";
    n.v_bias = p + "self_attn.v_proj.bias";
  }
  n.o_proj = p + "self_attn.o_proj.weight";
  n.post_attn_norm = p + "post_attention_layernorm.weight";
  n.gate_proj = p + "mlp.gate_proj.weight";
  n.up_proj = p + "mlp.up_proj.weight";
  n.down_proj = p + "mlp.down_proj.weight";
  return n;
}

GlobalTensorNames llama_global_names() {
  return {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
}

const Architecture& llama_architecture() {
  static const Architecture a{"llama", validate_llama, llama_layer_names, llama_global_names};
  return a;
}

const Architecture& mistral_architecture() {
  static const Architecture a{"mistral", validate_llama, llama_layer_names, llama_global_names};
  return a;
}

}  // namespace pagoda
