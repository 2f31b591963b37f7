// The llama decoder, shared by the llama-style families (llama, mistral,
// qwen2, qwen3, phi3): the standard Hugging Face tensor names, their loading, and
// the layer function. A family picks which optional tensors its layers have
// (through its names function) and reuses the loading and the forward.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "io/model_config.h"
#include "model/blocks.h"
#include "model/forward_context.h"
#include "model/weight_loader.h"
#include "model/weights.h"

namespace pagoda {

// "model.layers.N.self_attn.q_proj.weight", ...; q/k/v biases when
// config.attention_bias, no q/k norms.
LayerTensorNames llama_layer_names(const ModelConfig& config, int64_t layer);
// The same under `base` ("model.", or "language_model.model." and the like
// for a language model inside a multimodal checkpoint) instead of "model.".
LayerTensorNames llama_layer_names_under(const ModelConfig& config, int64_t layer,
                                         const std::string& base);
// "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight".
GlobalTensorNames llama_global_names();

using LayerNamesFn = LayerTensorNames (*)(const ModelConfig& config, int64_t layer);

// The embedding, every layer as `names` says (norms, attention, SwiGLU MLP),
// the final norm and the lm_head, with llama_global_names(); under pipeline
// parallelism only the stage's layers and globals (blocks.h).
Status load_llama_decoder(const ModelConfig& config, LayerNamesFn names, WeightLoader& loader,
                          ModelWeights* weights);

// Pre-norm layers: x += attention(norm(x)); x += swiglu_mlp(norm(x)); then
// the final norm (under pipeline parallelism: begin_stage / end_stage
// instead of the embedding and the final norm). Each residual add is fused into the following norm
// (add_and_norm), so per layer the ops are: [add_]rms_norm, qkv linear,
// qk_norm_rope_kv_write ([qk_norm], rope, kv_write), paged_attention,
// o_proj, add_rms_norm, gate_up linear, silu_mul, down linear.
// The optional steps (bias, qk_norm)
// follow the loaded weights. A layer marked in config.sliding_layers (Phi-3)
// attends only within config.sliding_window.
void llama_forward(const ModelWeights& weights, ForwardContext& ctx);

}  // namespace pagoda
