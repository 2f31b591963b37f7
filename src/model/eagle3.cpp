#include "model/eagle3.h"

#include <string>

#include "model/architecture.h"
#include "model/llama_decoder.h"

namespace pagoda {
namespace {

Status validate_eagle3(const ModelConfig& c) {
  if (c.num_layers != 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "EAGLE-3 head: " + std::to_string(c.num_layers) + " layers; it has one");
  if (c.qk_norm)
    return make_error(ErrorCode::kUnsupported, "EAGLE-3 head: q/k norms are not part of EAGLE-3");
  const int64_t qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  if (c.intermediate_size < qkv_rows)
    return make_error(ErrorCode::kUnsupported,
                      "EAGLE-3 head: intermediate_size " + std::to_string(c.intermediate_size) +
                          " below the q/k/v width " + std::to_string(qkv_rows));
  return {};
}

Status load_eagle3(const ModelConfig& c, WeightLoader& loader, ModelWeights* w) {
  const std::string p = loader.has("fc.weight") ? "" : "model.";
  const std::string m = p + "midlayer.";
  const int64_t h = c.hidden_size, d = c.head_dim;
  for (int64_t j = 0; j < 3; ++j) {
    PAGODA_ASSIGN_OR_RETURN(w->eagle3_fc[j], loader.load_linear_columns(p + "fc.weight", {h, 3 * h},
                                                                        {j * h, (j + 1) * h}));
  }
  if (loader.has(p + "embed_tokens.weight")) {  // over the target's vocabulary
    ModelConfig target_vocab = c;
    target_vocab.vocab_size = loader.shape_of(p + "embed_tokens.weight").at(0);
    GlobalTensorNames g;
    g.embed = p + "embed_tokens.weight";
    PAGODA_RETURN_IF_ERROR(load_embedding(target_vocab, g, loader, w));
  }
  PAGODA_ASSIGN_OR_RETURN(w->final_norm, load_norm(c, p + "norm.weight", loader));
  PAGODA_ASSIGN_OR_RETURN(w->lm_head, loader.load_linear(p + "lm_head.weight", {c.vocab_size, h}));
  w->first_layer = 0;
  w->layers.resize(1);
  LayerWeights& l = w->layers[0];
  const std::vector<std::string> qkv = {
      m + "self_attn.q_proj.weight", m + "self_attn.k_proj.weight", m + "self_attn.v_proj.weight"};
  const std::vector<int64_t> rows = {c.num_heads * d, c.num_kv_heads * d, c.num_kv_heads * d};
  PAGODA_ASSIGN_OR_RETURN(l.qkv, loader.load_fused_linear_columns(qkv, rows, 2 * h, {0, h}));
  PAGODA_ASSIGN_OR_RETURN(w->eagle3_qkv_hidden,
                          loader.load_fused_linear_columns(qkv, rows, 2 * h, {h, 2 * h}));
  PAGODA_ASSIGN_OR_RETURN(l.o_proj,
                          loader.load_linear(m + "self_attn.o_proj.weight", {h, c.num_heads * d}));
  PAGODA_ASSIGN_OR_RETURN(l.input_norm, load_norm(c, m + "input_layernorm.weight", loader));
  PAGODA_ASSIGN_OR_RETURN(w->eagle3_hidden_norm, load_norm(c, m + "hidden_norm.weight", loader));
  PAGODA_ASSIGN_OR_RETURN(l.post_attn_norm,
                          load_norm(c, m + "post_attention_layernorm.weight", loader));
  LayerTensorNames mlp;
  mlp.gate_proj = m + "mlp.gate_proj.weight";
  mlp.up_proj = m + "mlp.up_proj.weight";
  mlp.down_proj = m + "mlp.down_proj.weight";
  return load_swiglu(c, mlp, loader, &l);
}

void eagle3_forward(const ModelWeights& w, ForwardContext& ctx) {
  Backend& be = ctx.backend;
  const LayerWeights& l = w.layers[0];
  const int64_t t = ctx.qkv.dim(0), n = ctx.qkv.dim(1);
  embed_tokens(ctx, w);                                          // residual = embed(x)
  be.rms_norm(ctx.residual, l.input_norm, ctx.eps, ctx.normed);  // normed = e
  if (!ctx.hidden_pool.empty()) be.gather_rows(ctx.hidden_pool, ctx.slots, ctx.residual);  // = g
  be.rms_norm(ctx.residual, w.eagle3_hidden_norm, ctx.eps, ctx.proj);  // proj = n
  // gate_up [T, 2I] is free until the MLP (validate_eagle3: I >= qkv width):
  // its first T * n elements take the hidden half's q/k/v, the next the add's
  // norm output, which nothing reads (its weight, a view of q/k/v, only shapes it).
  const size_t half = static_cast<size_t>(t * n) * dtype_size(ctx.qkv.dtype);
  Tensor qkv_hidden(ctx.gate_up.data, ctx.qkv.dtype, {t, n});
  Tensor discarded(static_cast<char*>(ctx.gate_up.data) + half, ctx.qkv.dtype, {t, n});
  be.linear(ctx.normed, l.qkv, Tensor(), ctx.qkv);
  be.linear(ctx.proj, w.eagle3_qkv_hidden, Tensor(), qkv_hidden);
  be.add_rms_norm(ctx.qkv, qkv_hidden, Tensor(l.qkv.data, l.qkv.dtype, {n}), ctx.eps, discarded);
  // Attention from qkv (blocks.h attention() without its q/k/v linear).
  be.qk_norm_rope_kv_write(ctx.qkv, ctx.layout, l.q_norm, l.k_norm, ctx.eps, ctx.positions,
                           ctx.cos_sin, ctx.slots, ctx.caches[0]);
  be.paged_attention(ctx.qkv, ctx.layout, ctx.caches[0], ctx.meta,
                     AttentionScoring(ctx.attention_scale), ctx.attn);
  be.linear(ctx.attn, l.o_proj, Tensor(), ctx.proj);
  add_and_norm(ctx, l.post_attn_norm, &l.gate_up);  // residual = g + a, normed = its norm
  swiglu_mlp(ctx, l);
  be.add_rms_norm(ctx.residual, ctx.proj, w.final_norm, ctx.eps, ctx.normed);  // r, norm(r)
}

}  // namespace

const Architecture& eagle3_architecture() {
  static const Architecture a{"eagle3", validate_eagle3, load_eagle3, eagle3_forward, nullptr};
  return a;
}

}  // namespace pagoda
