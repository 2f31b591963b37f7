// Phi-3 / Phi-3.5 / Phi-4-mini (Phi3ForCausalLM, GGUF phi3): the llama
// decoder (llama_decoder.h) with the checkpoint's pre-fused
// self_attn.qkv_proj and mlp.gate_up_proj tensors, no biases, no q/k norms;
// longrope rope scaling (rope.h) and, when config.sliding_window is shorter
// than the context, every layer masked by it (config.sliding_layers).
#include <string>

#include "model/architecture.h"
#include "model/llama_decoder.h"

namespace pagoda {
namespace {

Status validate_phi3(const ModelConfig& c) {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument, "model config (phi3): " + what);
  };
  if (c.qk_norm) return bad("q/k norms are not part of this family");
  if (c.attention_bias) return bad("Phi-3 has no q/k/v biases");
  if (!c.sliding_layers.empty() && static_cast<int64_t>(c.sliding_layers.size()) != c.num_layers)
    return bad("sliding_layers must list every layer");
  if (!c.sliding_layers.empty() && c.sliding_window <= 0)
    return bad("sliding_window must be positive");
  return {};
}

// "model.layers.N.self_attn.qkv_proj.weight", "...mlp.gate_up_proj.weight";
// the rest as llama_layer_names.
LayerTensorNames phi3_layer_names(const ModelConfig& config, int64_t layer) {
  LayerTensorNames n = llama_layer_names(config, layer);
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  n.q_proj = n.k_proj = n.v_proj = n.gate_proj = n.up_proj = "";
  n.qkv_proj = p + "self_attn.qkv_proj.weight";
  n.gate_up_proj = p + "mlp.gate_up_proj.weight";
  return n;
}

Status load_phi3(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  return load_llama_decoder(c, phi3_layer_names, loader, w);
}

}  // namespace

const Architecture& phi3_architecture() {
  static const Architecture a{"phi3", validate_phi3, load_phi3, llama_forward, phi3_layer_names};
  return a;
}

}  // namespace pagoda
