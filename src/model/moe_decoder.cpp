#include "model/moe_decoder.h"

#include "model/llama_decoder.h"

namespace pagoda {

MoeTensorNames qwen_moe_names(const ModelConfig& c, int64_t layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
  MoeTensorNames n;
  n.router = p + "gate.weight";
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string x = p + "experts." + std::to_string(e) + ".";
    n.expert_gate.push_back(x + "gate_proj.weight");
    n.expert_up.push_back(x + "up_proj.weight");
    n.expert_down.push_back(x + "down_proj.weight");
  }
  if (c.shared_expert_intermediate_size > 0) {
    n.shared_gate_proj = p + "shared_expert.gate_proj.weight";
    n.shared_up_proj = p + "shared_expert.up_proj.weight";
    n.shared_down_proj = p + "shared_expert.down_proj.weight";
    n.shared_gate = p + "shared_expert_gate.weight";
  }
  return n;
}

Status load_moe(const ModelConfig& c, const MoeTensorNames& n, WeightLoader& loader,
                LayerWeights* l) {
  const int64_t h = c.hidden_size, e = c.num_experts, im = c.moe_intermediate_size;
  PAGODA_ASSIGN_OR_RETURN(l->router, loader.load(n.router, {e, h}));
  std::vector<std::string> gate_up;  // gate_0, up_0, gate_1, up_1, ...
  for (int64_t i = 0; i < e; ++i) {
    gate_up.push_back(n.expert_gate[static_cast<size_t>(i)]);
    gate_up.push_back(n.expert_up[static_cast<size_t>(i)]);
  }
  PAGODA_ASSIGN_OR_RETURN(Tensor gu,
                          loader.load_fused(gate_up, std::vector<int64_t>(2 * e, im), {h}));
  l->experts_gate_up = gu.reshape({e, 2 * im, h});
  PAGODA_ASSIGN_OR_RETURN(Tensor down,
                          loader.load_fused(n.expert_down, std::vector<int64_t>(e, h), {im}));
  l->experts_down = down.reshape({e, h, im});
  if (n.shared_gate_proj.empty()) return {};
  const int64_t is = c.shared_expert_intermediate_size;
  PAGODA_ASSIGN_OR_RETURN(l->shared_gate_up,
                          loader.load_fused({n.shared_gate_proj, n.shared_up_proj}, {is, is}, {h}));
  PAGODA_ASSIGN_OR_RETURN(l->shared_down, loader.load(n.shared_down_proj, {h, is}));
  PAGODA_ASSIGN_OR_RETURN(l->shared_gate, loader.load(n.shared_gate, {1, h}));
  return {};
}

Status load_moe_decoder(const ModelConfig& c, MoeFamilyNames names, WeightLoader& loader,
                        ModelWeights* w) {
  const GlobalTensorNames g = llama_global_names();
  PAGODA_RETURN_IF_ERROR(load_embedding(c, g, loader, w));
  const IndexRange layers = stage_layers(c, loader);
  w->first_layer = layers.begin;
  w->layers.resize(static_cast<size_t>(layers.size()));
  for (int64_t i = layers.begin; i < layers.end; ++i) {
    const LayerTensorNames n = names.layer(c, i);
    LayerWeights& l = w->layers[static_cast<size_t>(i - layers.begin)];
    PAGODA_ASSIGN_OR_RETURN(l.input_norm, load_norm(c, n.input_norm, loader));
    PAGODA_RETURN_IF_ERROR(load_attention(c, n, loader, &l));
    PAGODA_ASSIGN_OR_RETURN(l.post_attn_norm, load_norm(c, n.post_attn_norm, loader));
    if (c.is_moe_layer(i)) {
      PAGODA_RETURN_IF_ERROR(load_moe(c, names.moe(c, i), loader, &l));
    } else {
      PAGODA_RETURN_IF_ERROR(load_swiglu(c, n, loader, &l));
    }
  }
  return load_final_norm_and_head(c, g, loader, w);
}

void moe_mlp(ForwardContext& ctx, const LayerWeights& l) {
  Backend& be = ctx.backend;
  be.linear(ctx.normed, l.router, Tensor(), ctx.router_logits);
  be.moe_route(ctx.router_logits, ctx.config.norm_topk_prob, ctx.topk_ids, ctx.topk_weights);
  be.moe_experts(ctx.normed, l.experts_gate_up, l.experts_down, ctx.topk_ids, ctx.topk_weights,
                 ctx.expert_gate_up, ctx.expert_act, ctx.proj);
  if (l.shared_gate_up.empty()) return;
  be.linear(ctx.normed, l.shared_gate_up, Tensor(), ctx.shared_gate_up);
  be.silu_mul(ctx.shared_gate_up, ctx.shared_act);
  be.linear(ctx.shared_act, l.shared_down, Tensor(), ctx.shared_out);
  be.add_sigmoid_gated(ctx.proj, ctx.shared_out, ctx.normed, l.shared_gate);
}

void moe_forward(const ModelWeights& w, ForwardContext& ctx) {
  bool pending = begin_stage(ctx, w);  // proj holds a block output to add
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    if (pending)
      add_and_norm(ctx, l.input_norm, &l.qkv);
    else
      norm(ctx, l.input_norm, &l.qkv);
    pending = true;
    attention(ctx, l, i);
    add_and_norm(ctx, l.post_attn_norm, l.router.empty() ? &l.gate_up : nullptr);
    if (l.router.empty())
      swiglu_mlp(ctx, l);
    else
      moe_mlp(ctx, l);
  }
  end_stage(ctx, w.final_norm);
}

}  // namespace pagoda
