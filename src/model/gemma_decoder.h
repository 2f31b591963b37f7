// The Gemma decoder that gemma2 and gemma3 share: Hugging Face's Gemma 2 / 3
// tensor names, their loading (RMSNorm weights as 1 + w), and the forward
// with sandwich norms, GeGLU, scaled embeddings, per-layer sliding windows
// and rope tables, and attention-logit soft-capping. What differs between
// the two families is in the config (qk_norm, soft-capping, which layers
// slide, rope_local_base_freq), so one load and one forward serve both.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "io/model_config.h"
#include "model/blocks.h"
#include "model/forward_context.h"
#include "model/weight_loader.h"
#include "model/weights.h"

namespace pagoda {

// "<base>layers.N.self_attn.q_proj.weight", ...: the llama names plus the
// sandwich norms ("pre_feedforward_layernorm", "post_feedforward_layernorm";
// "post_attention_layernorm" is then the norm of the attention output),
// self_attn.q_norm / k_norm when config.qk_norm, q/k/v biases when
// config.attention_bias.
LayerTensorNames gemma_layer_names(const ModelConfig& config, int64_t layer,
                                   const std::string& base);

// gemma_layer_names under "model." (Gemma2/3ForCausalLM): the names
// Architecture::layer_names gives --load-format dummy.
LayerTensorNames gemma_causal_lm_layer_names(const ModelConfig& config, int64_t layer);

// The embedding, every layer of the stage (the four norms, attention with
// optional q/k norms, the gate / up / down MLP), the final norm and the tied
// (or explicit) lm_head; norms get 1 + w when config.norm_weight_offset. The
// tensors are under "model." or, in a Gemma3ForConditionalGeneration
// checkpoint, under its language model ("language_model.model." or
// "model.language_model."; the vision tower's tensors are not read).
Status load_gemma_decoder(const ModelConfig& config, WeightLoader& loader, ModelWeights* weights);

// Checks the Gemma fields both families need: sandwich norms and GeGLU
// set, one sliding_layers entry per layer, a positive window when a layer
// slides. Errors name the family and the field.
Status validate_gemma_config(const ModelConfig& config, const char* family);

// residual = embed(ids) * sqrt(H) (the factor rounded to the compute dtype,
// as HF does), then per layer:
//   normed = norm(x); proj = norm_post_attn(attention(normed));
//   x += proj; normed = norm_pre_ff(x); proj = norm_post_ff(geglu(normed))
// with the next layer's (or the final) add_and_norm adding proj. A sliding
// layer's attention masks by config.sliding_window and uses ctx.cos_sin_local
// when set; every layer scales scores by ctx.attention_scale and caps them
// by config.attn_logit_softcapping. The ops per layer: [add_]rms_norm, qkv
// linear, qk_norm_rope_kv_write ([qk_norm], rope, kv_write),
// paged_attention, o_proj, rms_norm, add_rms_norm, gate_up linear,
// gelu_tanh_mul, down linear, rms_norm.
void gemma_forward(const ModelWeights& weights, ForwardContext& ctx);

}  // namespace pagoda
