#include "model/load_weights.h"

#include <chrono>
#include <utility>

#include "core/log.h"
#include "model/weight_loader.h"

namespace pagoda {
namespace {

Status load_layer(const ModelConfig& c, const LayerTensorNames& n, WeightLoader& loader,
                  LayerWeights* l) {
  const int64_t h = c.hidden_size, d = c.head_dim, inter = c.intermediate_size;
  const int64_t q_rows = c.num_heads * d, kv_rows = c.num_kv_heads * d;
  PAGODA_ASSIGN_OR_RETURN(l->input_norm, loader.load(n.input_norm, {h}));
  PAGODA_ASSIGN_OR_RETURN(
      l->qkv, loader.load_fused({n.q_proj, n.k_proj, n.v_proj}, {q_rows, kv_rows, kv_rows}, {h}));
  if (!n.q_bias.empty()) {
    PAGODA_ASSIGN_OR_RETURN(l->qkv_bias, loader.load_fused({n.q_bias, n.k_bias, n.v_bias},
                                                           {q_rows, kv_rows, kv_rows}, {}));
  }
  if (!n.q_norm.empty()) {
    PAGODA_ASSIGN_OR_RETURN(l->q_norm, loader.load(n.q_norm, {d}));
    PAGODA_ASSIGN_OR_RETURN(l->k_norm, loader.load(n.k_norm, {d}));
  }
  PAGODA_ASSIGN_OR_RETURN(l->o_proj, loader.load(n.o_proj, {h, q_rows}));
  PAGODA_ASSIGN_OR_RETURN(l->post_attn_norm, loader.load(n.post_attn_norm, {h}));
  PAGODA_ASSIGN_OR_RETURN(l->gate_up,
                          loader.load_fused({n.gate_proj, n.up_proj}, {inter, inter}, {h}));
  PAGODA_ASSIGN_OR_RETURN(l->down, loader.load(n.down_proj, {h, inter}));
  return {};
}

}  // namespace

Result<ModelWeights> load_model_weights(const Architecture& arch, const ModelConfig& config,
                                        Backend& backend, WeightSource& source) {
  const auto start = std::chrono::steady_clock::now();
  ModelWeights w;
  WeightLoader loader(backend, source, &w);
  const GlobalTensorNames g = arch.global_names();
  const int64_t v = config.vocab_size, h = config.hidden_size;
  PAGODA_ASSIGN_OR_RETURN(w.embed, loader.load(g.embed, {v, h}));
  w.layers.resize(static_cast<size_t>(config.num_layers));
  for (int64_t i = 0; i < config.num_layers; ++i)
    PAGODA_RETURN_IF_ERROR(load_layer(config, arch.layer_names(config, i), loader, &w.layers[i]));
  PAGODA_ASSIGN_OR_RETURN(w.final_norm, loader.load(g.final_norm, {h}));
  if (config.tie_word_embeddings || !loader.has(g.lm_head)) {
    if (!config.tie_word_embeddings)
      log_info("no {} in the weights: tying it to {}", g.lm_head, g.embed);
    w.lm_head = w.embed;
  } else {
    PAGODA_ASSIGN_OR_RETURN(w.lm_head, loader.load(g.lm_head, {v, h}));
  }
  loader.finish();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log_info("uploaded {} tensors of {} ({}): {:.2f} GiB read, {:.2f} GiB on {} in {:.1f} s",
           loader.num_tensors_read(), source.describe(), config.architecture,
           static_cast<double>(loader.num_bytes_read()) / (1 << 30),
           static_cast<double>(w.num_bytes) / (1 << 30), backend.name(), secs);
  return w;
}

}  // namespace pagoda
