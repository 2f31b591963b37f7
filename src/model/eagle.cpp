#include "model/eagle.h"

#include <string>

#include "model/architecture.h"
#include "model/llama_decoder.h"

namespace pagoda {
namespace {

Status validate_eagle(const ModelConfig& c) {
  if (c.num_layers != 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "EAGLE head: " + std::to_string(c.num_layers) + " layers; EAGLE-1 has one");
  if (c.num_heads * c.head_dim != c.hidden_size)
    return make_error(ErrorCode::kUnsupported,
                      "EAGLE head: num_attention_heads * head_dim must equal hidden_size");
  if (c.qk_norm)
    return make_error(ErrorCode::kUnsupported, "EAGLE head: q/k norms are not part of EAGLE-1");
  return {};
}

Status load_eagle(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  const std::string p = loader.has("fc.weight") ? "" : "model.";
  const int64_t h = c.hidden_size;
  PAGODA_ASSIGN_OR_RETURN(w->eagle_fc_embed,
                          loader.load_linear_columns(p + "fc.weight", {h, 2 * h}, {0, h}));
  PAGODA_ASSIGN_OR_RETURN(w->eagle_fc_hidden,
                          loader.load_linear_columns(p + "fc.weight", {h, 2 * h}, {h, 2 * h}));
  if (loader.has(p + "fc.bias")) {
    PAGODA_ASSIGN_OR_RETURN(w->eagle_fc_bias, loader.load(p + "fc.bias", {h}));
  }
  if (loader.has(p + "embed_tokens.weight")) {
    GlobalTensorNames g;
    g.embed = p + "embed_tokens.weight";
    PAGODA_RETURN_IF_ERROR(load_embedding(c, g, loader, w));
  }
  const LayerTensorNames n = llama_layer_names_under(c, 0, p);
  w->first_layer = 0;
  w->layers.resize(1);
  LayerWeights& l = w->layers[0];
  PAGODA_RETURN_IF_ERROR(load_attention(c, n, loader, &l));
  PAGODA_ASSIGN_OR_RETURN(l.post_attn_norm, load_norm(c, n.post_attn_norm, loader));
  return load_swiglu(c, n, loader, &l);
}

void eagle_forward(const ModelWeights& w, ForwardContext& ctx) {
  Backend& be = ctx.backend;
  const LayerWeights& l = w.layers[0];
  const int64_t t = ctx.residual.dim(0), h = ctx.residual.dim(1);
  Tensor fc_hidden = ctx.attn.reshape({t, h});  // validate_eagle: Hq D == H
  embed_tokens(ctx, w);                          // residual = e
  if (!ctx.hidden_pool.empty()) be.gather_rows(ctx.hidden_pool, ctx.slots, ctx.proj);
  be.linear(ctx.residual, w.eagle_fc_embed, w.eagle_fc_bias, ctx.normed);
  be.linear(ctx.proj, w.eagle_fc_hidden, Tensor(), fc_hidden);
  // normed = z (the norm written to residual is discarded), then residual = z.
  be.add_rms_norm(ctx.normed, fc_hidden, l.post_attn_norm, ctx.eps, ctx.residual);
  be.copy_device(ctx.residual.data, ctx.normed.data, ctx.normed.nbytes());
  attention(ctx, l, 0);  // proj = attention(z): no input_layernorm
  add_and_norm(ctx, l.post_attn_norm, &l.gate_up);
  swiglu_mlp(ctx, l);
  // residual += proj; normed = residual, no final norm (the norm written first is replaced).
  be.add_rms_norm(ctx.residual, ctx.proj, l.post_attn_norm, ctx.eps, ctx.normed);
  be.copy_device(ctx.normed.data, ctx.residual.data, ctx.residual.nbytes());
}

}  // namespace

const Architecture& eagle_architecture() {
  static const Architecture a{"eagle", validate_eagle, load_eagle, eagle_forward, nullptr};
  return a;
}

}  // namespace pagoda
