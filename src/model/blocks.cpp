#include "model/blocks.h"

#include "backend/communicator.h"
#include "core/log.h"
#include "core/units.h"
#include "model/pipeline_parallel.h"
#include "model/tensor_parallel.h"

namespace pagoda {

namespace {

// What a norm weight file value w is offset by: Gemma's (1 + w).
float norm_offset(const ModelConfig& c) {
  return c.norm_weight_offset ? 1.0f : 0.0f;
}

// Sums a partial `proj` over the tensor-parallel ranks (forward_context.h).
void reduce_proj(ForwardContext& ctx) {
  if (!ctx.proj_partial) return;
  ctx.tp->all_reduce_sum(ctx.proj);
  ctx.proj_partial = false;
}

// Marks `proj` as the rank's partial sum of a row-parallel output.
void mark_row_parallel(ForwardContext& ctx) {
  ctx.proj_partial = ctx.tp != nullptr && ctx.tp->size() > 1;
}

// Whether ctx's producer path serves the linear `w`: the path is on and w is
// FP8 with dynamic per-token activations (block 0, no input_scale).
bool takes_fp8_rows(const ForwardContext& ctx, const LinearWeight* w) {
  return w != nullptr && !ctx.fp8_codes.empty() && w->is_fp8() && w->block == 0 &&
         w->input_scale.empty();
}

// The producer scratch viewed for an activation [T, k].
Fp8Rows fp8_rows(const ForwardContext& ctx, int64_t k) {
  return {Tensor(ctx.fp8_codes.data, DType::kF8E4M3, {ctx.fp8_scales.dim(0), k}), ctx.fp8_scales};
}

// out = normed @ w^T (+ bias), from normed's codes when the norm left them.
void linear_normed(ForwardContext& ctx, const LinearWeight& w, const Tensor& bias, Tensor& out) {
  if (ctx.normed_fp8) {
    ctx.normed_fp8 = false;
    ctx.backend.linear_fp8_rows(fp8_rows(ctx, ctx.normed.dim(1)), w, bias, out);
    return;
  }
  ctx.backend.linear(ctx.normed, w, bias, out);
}

}  // namespace

Result<Tensor> load_norm(const ModelConfig& c, const std::string& name, WeightLoader& loader) {
  return loader.load_offset(name, {c.hidden_size}, norm_offset(c));
}

Status load_attention(const ModelConfig& c, const LayerTensorNames& n, WeightLoader& loader,
                      LayerWeights* l) {
  const int64_t h = c.hidden_size, d = c.head_dim;
  const int64_t q_rows = c.num_heads * d, kv_rows = c.num_kv_heads * d;
  // The shard's heads as row (qkv) and column (o_proj) ranges; all of them without tp.
  const IndexRange qh = tp_q_heads(c, loader.shard()), kvh = tp_kv_heads(c, loader.shard());
  const IndexRange q = {qh.begin * d, qh.end * d}, kv = {kvh.begin * d, kvh.end * d};
  if (!n.qkv_proj.empty()) {  // pre-fused: the three parts are row ranges of one tensor
    const int64_t rows = q_rows + 2 * kv_rows;
    const IndexRange k = {q_rows + kv.begin, q_rows + kv.end};
    const IndexRange v = {q_rows + kv_rows + kv.begin, q_rows + kv_rows + kv.end};
    PAGODA_ASSIGN_OR_RETURN(l->qkv, loader.load_fused_linear({n.qkv_proj, n.qkv_proj, n.qkv_proj},
                                                             {rows, rows, rows}, h, {q, k, v}));
  } else {
    PAGODA_ASSIGN_OR_RETURN(
        l->qkv, loader.load_fused_linear({n.q_proj, n.k_proj, n.v_proj}, {q_rows, kv_rows, kv_rows},
                                         h, {q, kv, kv}));
  }
  if (!n.q_bias.empty()) {
    PAGODA_ASSIGN_OR_RETURN(
        l->qkv_bias, loader.load_fused({n.q_bias, n.k_bias, n.v_bias}, {q_rows, kv_rows, kv_rows},
                                       {}, {q, kv, kv}));
  }
  if (!n.q_norm.empty()) {  // per head: the same on every rank
    PAGODA_ASSIGN_OR_RETURN(l->q_norm, loader.load_offset(n.q_norm, {d}, norm_offset(c)));
    PAGODA_ASSIGN_OR_RETURN(l->k_norm, loader.load_offset(n.k_norm, {d}, norm_offset(c)));
  }
  PAGODA_ASSIGN_OR_RETURN(l->o_proj, loader.load_linear_columns(n.o_proj, {h, q_rows}, q));
  return {};
}

Status load_swiglu(const ModelConfig& c, const LayerTensorNames& n, WeightLoader& loader,
                   LayerWeights* l) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  const IndexRange mine = tp_intermediate(c, loader.shard());
  if (!n.gate_up_proj.empty()) {  // pre-fused: gate rows [0, I), up rows [I, 2I)
    const IndexRange up = {inter + mine.begin, inter + mine.end};
    PAGODA_ASSIGN_OR_RETURN(l->gate_up,
                            loader.load_fused_linear({n.gate_up_proj, n.gate_up_proj},
                                                     {2 * inter, 2 * inter}, h, {mine, up}));
  } else {
    PAGODA_ASSIGN_OR_RETURN(l->gate_up, loader.load_fused_linear({n.gate_proj, n.up_proj},
                                                                 {inter, inter}, h, {mine, mine}));
  }
  PAGODA_ASSIGN_OR_RETURN(l->down, loader.load_linear_columns(n.down_proj, {h, inter}, mine));
  return {};
}

IndexRange stage_layers(const ModelConfig& c, const WeightLoader& loader) {
  return pp_layers(c, loader.stage());
}

Status load_embedding(const ModelConfig& c, const GlobalTensorNames& g, WeightLoader& loader,
                      ModelWeights* w) {
  if (!loader.stage().first()) return {};
  const TpShard shard = loader.shard();
  const std::vector<int64_t> shape = {c.vocab_size, c.hidden_size};
  if (tp_vocab_parallel_embedding(shard.size)) {
    const IndexRange rows = tp_vocab(c, shard);
    PAGODA_ASSIGN_OR_RETURN(
        w->embed, loader.load_rows(g.embed, shape, rows, tp_vocab_block(c, shard.size)));
    w->embed_first_row = rows.begin;
    w->embed_vocab_parallel = true;
  } else {
    PAGODA_ASSIGN_OR_RETURN(w->embed, loader.load(g.embed, shape));
  }
  if (shard.size > 1 && shard.rank == 0) {
    const size_t replicated = dtype_nbytes(w->embed.dtype, c.vocab_size * c.hidden_size);
    if (w->embed_vocab_parallel)
      log_info("embedding: vocab-parallel over {} ranks, {} bytes ({:.2f} GiB) per rank ({} "
               "replicated)",
               shard.size, w->embed.nbytes(), to_gib(static_cast<double>(w->embed.nbytes())),
               replicated);
    else
      log_info("embedding: replicated (PAGODA_REPLICATED_EMBEDDING), {} bytes ({:.2f} GiB) per rank",
               replicated, to_gib(static_cast<double>(replicated)));
  }
  return {};
}

Status load_final_norm_and_head(const ModelConfig& c, const GlobalTensorNames& g,
                                WeightLoader& loader, ModelWeights* w) {
  if (!loader.stage().last()) return {};
  PAGODA_ASSIGN_OR_RETURN(w->final_norm, load_norm(c, g.final_norm, loader));
  const TpShard shard = loader.shard();
  if (shard.size > 1) {  // vocab-parallel: the rank's block of the head (or tied embedding)
    const bool tied = c.tie_word_embeddings || !loader.has(g.lm_head);
    if (tied && !c.tie_word_embeddings)
      log_info("no {} in the weights: tying it to {}", g.lm_head, g.embed);
    // A tied head is the rank's rows of the embedding: the vocab-parallel
    // embedding's own block when this stage holds it, else (a last stage
    // that is not the first, a replicated embedding, or one stored in a kept
    // block format, whose head stays in its blocks as without tp) a block of
    // its own.
    if (tied && w->embed_vocab_parallel && !loader.keeps_blocks(g.embed, c.hidden_size)) {
      w->lm_head = w->embed;
      return {};
    }
    PAGODA_ASSIGN_OR_RETURN(
        w->lm_head,
        loader.load_linear_rows(tied ? g.embed : g.lm_head, {c.vocab_size, c.hidden_size},
                                tp_vocab(c, shard), tp_vocab_block(c, shard.size)));
    return {};
  }
  if (c.tie_word_embeddings || !loader.has(g.lm_head)) {
    if (!c.tie_word_embeddings)
      log_info("no {} in the weights: tying it to {}", g.lm_head, g.embed);
    // An embedding stored in a kept block format (GGUF's token_embd as Q6_K,
    // Q8_0, ...) is also loaded as the head in its blocks: the lookup needs
    // converted rows, but the head reads all V x H every step, so its blocks
    // cost a fraction of the bytes (e.g. Gemma 3's 262,144-row vocabulary).
    if (loader.keeps_blocks(g.embed, c.hidden_size)) {
      PAGODA_ASSIGN_OR_RETURN(w->lm_head,
                              loader.load_linear(g.embed, {c.vocab_size, c.hidden_size}));
      return {};
    }
    if (w->embed.empty()) {  // a last stage that is not also the first
      PAGODA_ASSIGN_OR_RETURN(w->embed, loader.load(g.embed, {c.vocab_size, c.hidden_size}));
    }
    w->lm_head = w->embed;
    return {};
  }
  PAGODA_ASSIGN_OR_RETURN(w->lm_head, loader.load_linear(g.lm_head, {c.vocab_size, c.hidden_size}));
  return {};
}

void embed_tokens(ForwardContext& ctx, const ModelWeights& w) {
  ctx.backend.embedding(w.embed, ctx.ids, w.embed_first_row, ctx.residual);
  if (w.embed_vocab_parallel) ctx.tp->all_reduce_sum(ctx.residual);
}

void capture_aux_hidden(ForwardContext& ctx, int64_t layer) {
  for (size_t j = 0; j < ctx.aux_layers.size(); ++j) {
    if (ctx.aux_layers[j] != layer) continue;
    const Tensor& a = ctx.aux_hidden;
    const size_t rows_bytes = static_cast<size_t>(a.dim(1) * a.dim(2)) * dtype_size(a.dtype);
    ctx.backend.copy_device(static_cast<char*>(a.data) + j * rows_bytes, ctx.residual.data,
                            ctx.residual.nbytes());
  }
}

bool begin_stage(ForwardContext& ctx, const ModelWeights& w) {
  if (ctx.pp == nullptr || ctx.pp->rank() == 0) {
    embed_tokens(ctx, w);
    return false;
  }
  ctx.pp->recv(ctx.residual, ctx.pp->rank() - 1);
  ctx.pp->recv(ctx.proj, ctx.pp->rank() - 1);
  return true;
}

void end_stage(ForwardContext& ctx, const Tensor& final_norm) {
  if (ctx.pp == nullptr || ctx.pp->rank() == ctx.pp->size() - 1) {
    add_and_norm(ctx, final_norm);
    return;
  }
  reduce_proj(ctx);
  ctx.pp->send(ctx.residual, ctx.pp->rank() + 1);
  ctx.pp->send(ctx.proj, ctx.pp->rank() + 1);
}

void norm(ForwardContext& ctx, const Tensor& w, const LinearWeight* next) {
  ctx.normed_fp8 = takes_fp8_rows(ctx, next);
  if (ctx.normed_fp8) {
    Fp8Rows q = fp8_rows(ctx, ctx.normed.dim(1));
    ctx.backend.rms_norm_fp8(ctx.residual, w, ctx.eps, ctx.normed, q);
    return;
  }
  ctx.backend.rms_norm(ctx.residual, w, ctx.eps, ctx.normed);
}

void add_and_norm(ForwardContext& ctx, const Tensor& w, const LinearWeight* next) {
  ctx.normed_fp8 = false;
  if (ctx.proj_partial) {
    ctx.tp->all_reduce_add_rms_norm(ctx.backend, ctx.proj, ctx.residual, w, ctx.eps, ctx.normed);
    ctx.proj_partial = false;
    return;
  }
  ctx.normed_fp8 = takes_fp8_rows(ctx, next);
  if (ctx.normed_fp8) {
    Fp8Rows q = fp8_rows(ctx, ctx.normed.dim(1));
    ctx.backend.add_rms_norm_fp8(ctx.residual, ctx.proj, w, ctx.eps, ctx.normed, q);
    return;
  }
  ctx.backend.add_rms_norm(ctx.residual, ctx.proj, w, ctx.eps, ctx.normed);
}

void attention(ForwardContext& ctx, const LayerWeights& l, size_t layer) {
  attention(ctx, l, layer, AttentionScoring(ctx.attention_scale), ctx.cos_sin);
}

void attention(ForwardContext& ctx, const LayerWeights& l, size_t layer,
               const AttentionScoring& scoring, const Tensor& cos_sin) {
  Backend& be = ctx.backend;
  KvCacheView& cache = ctx.caches[layer];
  // A sliding layer's KV lives in the sliding-window group's pool when the
  // runner keeps that group (its cache view is into that pool).
  const bool sliding_group =
      ctx.sliding_meta != nullptr &&
      ctx.config.sliding_layers[static_cast<size_t>(ctx.first_layer) + layer];
  linear_normed(ctx, l.qkv, l.qkv_bias, ctx.qkv);
  be.qk_norm_rope_kv_write(ctx.qkv, ctx.layout, l.q_norm, l.k_norm, ctx.eps, ctx.positions, cos_sin,
                           sliding_group ? ctx.sliding_slots : ctx.slots, cache);
  be.paged_attention(ctx.qkv, ctx.layout, cache, sliding_group ? *ctx.sliding_meta : ctx.meta,
                     scoring, ctx.attn);
  be.linear(ctx.attn, l.o_proj, Tensor(), ctx.proj);
  mark_row_parallel(ctx);  // the next op sums the ranks' parts
}

void swiglu_mlp(ForwardContext& ctx, const LayerWeights& l) {
  Backend& be = ctx.backend;
  linear_normed(ctx, l.gate_up, Tensor(), ctx.gate_up);
  if (takes_fp8_rows(ctx, &l.down)) {
    Fp8Rows q = fp8_rows(ctx, ctx.act.dim(1));
    be.silu_mul_fp8(ctx.gate_up, ctx.act, q);
    be.linear_fp8_rows(q, l.down, Tensor(), ctx.proj);
  } else {
    be.silu_mul(ctx.gate_up, ctx.act);
    be.linear(ctx.act, l.down, Tensor(), ctx.proj);
  }
  mark_row_parallel(ctx);  // the next op sums the ranks' parts
}

void geglu_mlp(ForwardContext& ctx, const LayerWeights& l) {
  Backend& be = ctx.backend;
  linear_normed(ctx, l.gate_up, Tensor(), ctx.gate_up);
  be.gelu_tanh_mul(ctx.gate_up, ctx.act);
  be.linear(ctx.act, l.down, Tensor(), ctx.proj);
  mark_row_parallel(ctx);  // the next op sums the ranks' parts
}

void norm_output(ForwardContext& ctx, const Tensor& w) {
  reduce_proj(ctx);
  ctx.backend.rms_norm(ctx.proj, w, ctx.eps, ctx.proj);
}

}  // namespace pagoda
