// The shared building blocks of decoder families: for each block, the
// tensors it reads (by Hugging Face name), how they are loaded and fused,
// and the backend ops it enqueues on a ForwardContext. Families
// (llama_decoder.h and the family files) compose them; a block never
// branches on the family, only on which optional weights are loaded.
// Shapes as in forward_context.h; weights as in weights.h.
//
// Tensor parallelism lives here too, so a family built from these blocks
// needs nothing extra: the load functions read only the rank's slice
// (WeightLoader::shard(), the rules of tensor_parallel.h: qkv and gate_up
// column-parallel, o_proj and down row-parallel, the embedding and the
// lm_head vocab-parallel, norms replicated), and attention() / swiglu_mlp() leave their row-parallel
// output as the rank's partial sum (ctx.proj_partial), which the next op
// reading `proj` sums over ctx.tp: add_and_norm in one fused call
// (all-reduce + residual add + RMSNorm), norm_output and end_stage's send
// with a plain all-reduce first. Row-parallel linears take no bias: a bias there
// would be summed once per rank (a family with one must add it on rank 0
// only, after the all-reduce).
//
// Pipeline parallelism too (pipeline_parallel.h): a family loads the layers
// stage_layers() names; load_embedding and load_final_norm_and_head load
// only on the stage that uses them; and its forward starts with begin_stage()
// and ends with end_stage(), which embed or receive, and finish with the final
// norm or send, through ctx.pp.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "io/model_config.h"
#include "model/forward_context.h"
#include "model/weight_loader.h"
#include "model/weights.h"

namespace pagoda {

// Hugging Face names of one decoder layer's tensors; an empty name means the
// layer has no such tensor.
struct LayerTensorNames {
  std::string input_norm;
  std::string q_proj, k_proj, v_proj;
  // Pre-fused checkpoints (Phi-3): q, k, v stacked in one tensor
  // [(Hq + 2 Hkv) D, H], in place of q/k/v_proj; gate then up in one
  // [2I, H], in place of gate/up_proj. Empty: the separate tensors.
  std::string qkv_proj;
  std::string gate_up_proj;
  std::string q_bias, k_bias, v_bias;  // all three or none
  std::string q_norm, k_norm;          // both or none
  std::string o_proj;
  std::string post_attn_norm;
  std::string pre_ff_norm, post_ff_norm;  // sandwich norms (Gemma): both or none
  std::string gate_proj, up_proj, down_proj;
};

struct GlobalTensorNames {
  std::string embed;
  std::string final_norm;
  std::string lm_head;  // tied to embed when absent from the file or tie_word_embeddings
};

// ---- loading ----------------------------------------------------------------

// A norm weight [H] (`name`, which must not be empty), as the factor the
// norm multiplies by: 1 + w when c.norm_weight_offset (Gemma's HF files).
Result<Tensor> load_norm(const ModelConfig& c, const std::string& name, WeightLoader& loader);
// l->qkv [Q, H] fused from q/k/v_proj (rows q, then k, then v), or n.qkv_proj
// when set (the same rows, already fused: under tp the rank's rows of each
// of its three parts); l->qkv_bias
// [Q] the same way when n.q_bias is set; l->q_norm / k_norm [D] when
// n.q_norm is set (1 + w when c.norm_weight_offset); l->o_proj [H, Hq D]. `c` is the whole model's
// config (the file's shapes); under tp, Q, Hq and Hkv are the shard's (the rows of its heads,
// o_proj's columns of its q heads).
Status load_attention(const ModelConfig& c, const LayerTensorNames& n, WeightLoader& loader,
                      LayerWeights* l);
// l->gate_up [2I, H] fused from gate_proj then up_proj (or n.gate_up_proj
// when set: gate rows [0, I), up rows [I, 2I)); l->down [H, I]. Under
// tp, I is the shard's: its rows of gate and of up, its columns of down.
// The same tensors serve geglu_mlp().
Status load_swiglu(const ModelConfig& c, const LayerTensorNames& n, WeightLoader& loader,
                   LayerWeights* l);
// The decoder layers the loader's pipeline stage holds (global indices): all
// of them without pipeline parallelism.
IndexRange stage_layers(const ModelConfig& c, const WeightLoader& loader);
// w->embed [V, H] on the first pipeline stage; nothing on the others. Under
// tp (tp_vocab_parallel_embedding) the rank's vocab block [tp_vocab_block, H]
// in the compute dtype (w->embed_first_row, w->embed_vocab_parallel); rank 0
// logs which layout and its bytes per rank.
Status load_embedding(const ModelConfig& c, const GlobalTensorNames& g, WeightLoader& loader,
                      ModelWeights* w);
// On the last pipeline stage: w->final_norm [H]; w->lm_head [V, H], or
// w->embed when config.tie_word_embeddings or the file has no g.lm_head
// (logged; the embedding is loaded here when the stage has none yet). Under
// tp, w->lm_head is the rank's vocab-parallel block [tp_vocab_block, H] of
// that tensor (tensor_parallel.h): when tied, the vocab-parallel w->embed
// itself where this stage holds it and the file does not keep the embedding
// in blocks, else a buffer of its own.
// Nothing on the other stages.
Status load_final_norm_and_head(const ModelConfig& c, const GlobalTensorNames& g,
                                WeightLoader& loader, ModelWeights* w);

// ---- ops --------------------------------------------------------------------

// residual = w.embed[ids]; a vocab-parallel embedding: the rank's rows
// (zeros for the other ranks' ids), then all-reduced (sum) over ctx.tp.
void embed_tokens(ForwardContext& ctx, const ModelWeights& w);
// The start of a forward. Without pipeline parallelism or on the first
// stage: embed_tokens and returns false. On a later stage: receives the
// residual and the pending block output (`proj`) [T, H] from the previous
// stage and returns true: the first layer must add `proj` (add_and_norm, not
// norm).
bool begin_stage(ForwardContext& ctx, const ModelWeights& w);
// The end of a forward, after the last layer's block left its output in
// `proj`. Without pipeline parallelism or on the last stage:
// add_and_norm(final_norm), leaving the final hidden states in `normed`. On
// an earlier stage: sends the residual and `proj` (summed over tp) to the
// next stage.
void end_stage(ForwardContext& ctx, const Tensor& final_norm);
// normed = rms_norm(residual) * w. `next`: the linear that reads `normed`
// next (attention's qkv, the MLP's gate_up) or null; when the FP8 producer
// path serves it (ctx.fp8_codes set, next FP8 with dynamic per-token
// activations) the norm also writes normed's codes (ctx.normed_fp8) and that
// linear reads them.
void norm(ForwardContext& ctx, const Tensor& w, const LinearWeight* next = nullptr);
// RunnerOptions::aux_hidden_layers: when `layer` (a global layer id) is
// ctx.aux_layers[j], copies residual's T rows to ctx.aux_hidden[j]. Called
// where residual holds the stream entering `layer` (before its first block).
void capture_aux_hidden(ForwardContext& ctx, int64_t layer);
// residual += proj, then normed = rms_norm(residual) * w (one fused op;
// with a partial proj, the tp all-reduce fused in too, and no codes). `next`
// as in norm().
void add_and_norm(ForwardContext& ctx, const Tensor& w, const LinearWeight* next = nullptr);
// proj = o_proj(paged_attention(rope(qk_norm(qkv(normed))))) for `layer`:
// the fused q/k/v projection (+ bias when l.qkv_bias is set), then one
// qk_norm_rope_kv_write: per-head q/k RMSNorm when l.q_norm is set, RoPE
// at ctx.positions, the new k/v written to ctx.caches[layer] at ctx.slots;
// attention over each sequence's cache,
// and the output projection (under tp the rank's partial sum: ctx.proj_partial). A layer that
// config.sliding_layers marks sliding uses ctx.sliding_slots and
// ctx.sliding_meta instead when ctx.sliding_meta is set (its cache is in the
// sliding-window group's pool).
void attention(ForwardContext& ctx, const LayerWeights& l, size_t layer);
// The same with the layer's own scoring (scale, soft-capping, sliding
// window) and rope table (ctx.cos_sin or ctx.cos_sin_local).
void attention(ForwardContext& ctx, const LayerWeights& l, size_t layer,
               const AttentionScoring& scoring, const Tensor& cos_sin);
// proj = down(silu(gate(normed)) * up(normed)) (under tp the rank's partial
// sum: ctx.proj_partial). With the FP8 producer path and an FP8 down of
// dynamic per-token activations, silu_mul_fp8 writes act's codes for down.
void swiglu_mlp(ForwardContext& ctx, const LayerWeights& l);
// proj = down(gelu_tanh(gate(normed)) * up(normed)) (under tp the rank's
// partial sum): Gemma's GeGLU.
void geglu_mlp(ForwardContext& ctx, const LayerWeights& l);
// proj = rms_norm(proj) * w in place: a sandwich norm of a block's output
// (Gemma), after summing a partial proj over tp, before add_and_norm adds it.
void norm_output(ForwardContext& ctx, const Tensor& w);

}  // namespace pagoda
