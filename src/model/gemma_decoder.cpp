#include "model/gemma_decoder.h"

#include <cmath>
#include <string>

#include "core/float_elements.h"
#include "model/llama_decoder.h"

namespace pagoda {

namespace {

// Where the decoder's tensors live: "model." (Gemma2/3ForCausalLM), or the
// language model of a Gemma3ForConditionalGeneration checkpoint
// ("language_model.model." as Google published them, "model.language_model."
// as transformers 4.52+ saves them).
std::string tensor_base(const WeightLoader& loader) {
  for (const char* base : {"model.", "language_model.model.", "model.language_model."}) {
    if (loader.has(std::string(base) + "embed_tokens.weight")) return base;
  }
  return "model.";
}

}  // namespace

LayerTensorNames gemma_layer_names(const ModelConfig& config, int64_t layer,
                                   const std::string& base) {
  // The llama names, plus q/k norms (Gemma 3) and the feed-forward sandwich
  // norms; post_attention_layernorm is the attention block's output norm.
  LayerTensorNames n = llama_layer_names_under(config, layer, base);
  const std::string p = base + "layers." + std::to_string(layer) + ".";
  if (config.qk_norm) {
    n.q_norm = p + "self_attn.q_norm.weight";
    n.k_norm = p + "self_attn.k_norm.weight";
  }
  n.pre_ff_norm = p + "pre_feedforward_layernorm.weight";
  n.post_ff_norm = p + "post_feedforward_layernorm.weight";
  return n;
}

LayerTensorNames gemma_causal_lm_layer_names(const ModelConfig& config, int64_t layer) {
  return gemma_layer_names(config, layer, "model.");
}

Status load_gemma_decoder(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  const std::string base = tensor_base(loader);
  const GlobalTensorNames g{base + "embed_tokens.weight", base + "norm.weight", "lm_head.weight"};
  PAGODA_RETURN_IF_ERROR(load_embedding(c, g, loader, w));
  const IndexRange layers = stage_layers(c, loader);
  w->first_layer = layers.begin;
  w->layers.resize(static_cast<size_t>(layers.size()));
  for (int64_t i = layers.begin; i < layers.end; ++i) {
    const LayerTensorNames n = gemma_layer_names(c, i, base);
    LayerWeights& l = w->layers[static_cast<size_t>(i - layers.begin)];
    PAGODA_ASSIGN_OR_RETURN(l.input_norm, load_norm(c, n.input_norm, loader));
    PAGODA_RETURN_IF_ERROR(load_attention(c, n, loader, &l));
    PAGODA_ASSIGN_OR_RETURN(l.post_attn_norm, load_norm(c, n.post_attn_norm, loader));
    PAGODA_ASSIGN_OR_RETURN(l.pre_ff_norm, load_norm(c, n.pre_ff_norm, loader));
    PAGODA_RETURN_IF_ERROR(load_swiglu(c, n, loader, &l));
    PAGODA_ASSIGN_OR_RETURN(l.post_ff_norm, load_norm(c, n.post_ff_norm, loader));
  }
  return load_final_norm_and_head(c, g, loader, w);
}

Status validate_gemma_config(const ModelConfig& c, const char* family) {
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string("model config (") + family + "): " + what);
  };
  if (!c.sandwich_norms || !c.gelu_tanh_mlp || !c.scale_embeddings)
    return bad("sandwich norms, GeGLU and scaled embeddings must be enabled");
  if (static_cast<int64_t>(c.sliding_layers.size()) != c.num_layers)
    return bad("sliding_layers must list every layer (layer_types)");
  for (bool sliding : c.sliding_layers)
    if (sliding && c.sliding_window <= 0) return bad("sliding_window must be positive");
  if (c.query_pre_attn_scalar <= 0) return bad("query_pre_attn_scalar must be positive");
  if (c.attn_logit_softcapping < 0 || c.final_logit_softcapping < 0)
    return bad("attn_logit_softcapping and final_logit_softcapping must not be negative");
  return {};
}

namespace {

// sqrt(H) rounded to the compute dtype: HF's
// torch.tensor(hidden_size ** 0.5, dtype=hidden_states.dtype).
float embedding_normalizer(const ForwardContext& ctx) {
  const DType cd = ctx.backend.compute_dtype();
  uint32_t storage = 0;
  store_float_element(cd, &storage, 0,
                      static_cast<float>(std::sqrt(static_cast<double>(ctx.config.hidden_size))));
  return load_float_element(cd, &storage, 0);
}

}  // namespace

void gemma_forward(const ModelWeights& w, ForwardContext& ctx) {
  const ModelConfig& c = ctx.config;
  bool pending = begin_stage(ctx, w);  // proj holds a block output to add
  if (!pending) ctx.backend.scale(ctx.residual, embedding_normalizer(ctx));
  const float cap = static_cast<float>(c.attn_logit_softcapping);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const bool sliding = c.sliding_layers[static_cast<size_t>(w.first_layer) + i];
    if (pending)
      add_and_norm(ctx, l.input_norm);
    else
      norm(ctx, l.input_norm);
    pending = true;
    const AttentionScoring scoring(ctx.attention_scale, cap,
                                   sliding ? static_cast<int32_t>(c.sliding_window) : 0);
    const bool local_rope = sliding && !ctx.cos_sin_local.empty();
    attention(ctx, l, i, scoring, local_rope ? ctx.cos_sin_local : ctx.cos_sin);
    norm_output(ctx, l.post_attn_norm);
    add_and_norm(ctx, l.pre_ff_norm);
    geglu_mlp(ctx, l);
    norm_output(ctx, l.post_ff_norm);
  }
  end_stage(ctx, w.final_norm);
}

}  // namespace pagoda
