// The mixture-of-experts decoder that mixtral, qwen2_moe and qwen3_moe
// share: llama-style attention (blocks.h) and, in each MoE layer
// (ModelConfig::is_moe_layer), a sparse MLP in place of the dense one:
//   router logits = x @ router^T (f32), softmax, top-k experts (ties: the
//   lower expert id), weights renormalised when config.norm_topk_prob;
//   out = sum over the k experts of weight * swiglu_e(x)
//   (+ sigmoid(x @ shared_gate^T) * swiglu_shared(x) with a shared expert).
// Experts are stacked [E, ...] in one tensor per projection (weights.h),
// loaded from per-expert tensors (a GGUF's stacked *_exps tensors are
// exposed per expert by its source). Dense layers (decoder_sparse_step,
// mlp_only_layers) keep the llama SwiGLU MLP of intermediate_size.
// Tensor parallelism is refused for these models (tensor_parallel.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/model_config.h"
#include "model/blocks.h"
#include "model/forward_context.h"
#include "model/weight_loader.h"
#include "model/weights.h"

namespace pagoda {

// Hugging Face names of one MoE layer's sparse-MLP tensors.
struct MoeTensorNames {
  std::string router;                                              // [E, H]
  std::vector<std::string> expert_gate, expert_up;                 // per expert, [Im, H]
  std::vector<std::string> expert_down;                            // per expert, [H, Im]
  std::string shared_gate_proj, shared_up_proj, shared_down_proj;  // empty: no shared expert
  std::string shared_gate;                                         // [1, H]
};

// A family's names: the attention, norms and dense-MLP names of `layer`
// (LayerTensorNames), and its sparse-MLP names (used when is_moe_layer).
struct MoeFamilyNames {
  LayerTensorNames (*layer)(const ModelConfig& config, int64_t layer);
  MoeTensorNames (*moe)(const ModelConfig& config, int64_t layer);
};

// "model.layers.N.mlp.gate.weight", "...mlp.experts.{e}.{gate,up,down}_proj.weight",
// and with config.shared_expert_intermediate_size "...mlp.shared_expert.*" and
// "...mlp.shared_expert_gate.weight" (Qwen2-MoE and Qwen3-MoE).
MoeTensorNames qwen_moe_names(const ModelConfig& config, int64_t layer);

// l->router [E, H]; l->experts_gate_up [E, 2Im, H] (expert e's gate rows,
// then its up rows); l->experts_down [E, H, Im]; the shared expert's
// l->shared_gate_up [2Is, H], l->shared_down [H, Is], l->shared_gate [1, H].
Status load_moe(const ModelConfig& c, const MoeTensorNames& n, WeightLoader& loader,
                LayerWeights* l);

// The embedding, every layer (norms, attention, and the sparse or the dense
// MLP), the final norm and the lm_head (llama_global_names()); under
// pipeline parallelism only the stage's layers and globals.
Status load_moe_decoder(const ModelConfig& c, MoeFamilyNames names, WeightLoader& loader,
                        ModelWeights* w);

// proj = the sparse MLP of `normed` for a layer with l.router set. Ops:
// linear (router, f32 out), moe_route, moe_experts, and with a shared
// expert: linear (gate_up), silu_mul, linear (down), add_sigmoid_gated.
void moe_mlp(ForwardContext& ctx, const LayerWeights& l);

// llama_forward's pre-norm layers with moe_mlp in the layers that have a
// router, swiglu_mlp in the others.
void moe_forward(const ModelWeights& w, ForwardContext& ctx);

}  // namespace pagoda
