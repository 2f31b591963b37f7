#include "model/llama_decoder.h"

#include <string>

namespace pagoda {

LayerTensorNames llama_layer_names(const ModelConfig& config, int64_t layer) {
  return llama_layer_names_under(config, layer, "model.");
}

LayerTensorNames llama_layer_names_under(const ModelConfig& config, int64_t layer,
                                         const std::string& base) {
  const std::string p = base + "layers." + std::to_string(layer) + ".";
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

Status load_llama_decoder(const ModelConfig& c, LayerNamesFn names, WeightLoader& loader,
                          ModelWeights* w) {
  const GlobalTensorNames g = llama_global_names();
  PAGODA_RETURN_IF_ERROR(load_embedding(c, g, loader, w));
  const IndexRange layers = stage_layers(c, loader);
  w->first_layer = layers.begin;
  w->layers.resize(static_cast<size_t>(layers.size()));
  for (int64_t i = layers.begin; i < layers.end; ++i) {
    const LayerTensorNames n = names(c, i);
    LayerWeights& l = w->layers[static_cast<size_t>(i - layers.begin)];
    PAGODA_ASSIGN_OR_RETURN(l.input_norm, load_norm(c, n.input_norm, loader));
    PAGODA_RETURN_IF_ERROR(load_attention(c, n, loader, &l));
    PAGODA_ASSIGN_OR_RETURN(l.post_attn_norm, load_norm(c, n.post_attn_norm, loader));
    PAGODA_RETURN_IF_ERROR(load_swiglu(c, n, loader, &l));
  }
  return load_final_norm_and_head(c, g, loader, w);
}

void llama_forward(const ModelWeights& w, ForwardContext& ctx) {
  const ModelConfig& c = ctx.config;
  bool pending = begin_stage(ctx, w);  // proj holds a block output to add
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    if (pending)
      add_and_norm(ctx, l.input_norm, &l.qkv);
    else
      norm(ctx, l.input_norm, &l.qkv);
    pending = true;
    const size_t layer = static_cast<size_t>(w.first_layer) + i;
    capture_aux_hidden(ctx, static_cast<int64_t>(layer));
    if (layer < c.sliding_layers.size() && c.sliding_layers[layer])
      attention(ctx, l, i,
                AttentionScoring(ctx.attention_scale, 0.0f, static_cast<int32_t>(c.sliding_window)),
                ctx.cos_sin);
    else
      attention(ctx, l, i);
    add_and_norm(ctx, l.post_attn_norm, &l.gate_up);
    swiglu_mlp(ctx, l);
  }
  end_stage(ctx, w.final_norm);
  // Id L: the stream leaving the last layer (residual now holds it).
  capture_aux_hidden(ctx, w.first_layer + static_cast<int64_t>(w.layers.size()));
}

}  // namespace pagoda
