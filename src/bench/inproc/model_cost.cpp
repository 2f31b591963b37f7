#include "bench/inproc/model_cost.h"

#include <algorithm>
#include <cmath>

namespace pagoda::bench {

ModelCost model_cost(const ModelConfig& c) {
  ModelCost m;
  const int64_t h = c.hidden_size, d = c.head_dim > 0 ? c.head_dim : c.hidden_size / c.num_heads;
  const int64_t q = c.num_heads * d, kv = c.num_kv_heads * d;
  int64_t attn = h * q + 2 * h * kv + q * h;
  if (c.attention_bias) attn += q + 2 * kv;
  const int64_t dense_mlp = 3 * h * c.intermediate_size;
  const int64_t norms = (c.sandwich_norms ? 4 : 2) * h + (c.qk_norm ? 2 * d : 0);
  for (int64_t l = 0; l < c.num_layers; ++l) m.moe_layers += c.is_moe_layer(l) ? 1 : 0;
  const int64_t dense_layers = c.num_layers - m.moe_layers;
  m.num_experts = c.num_experts;
  m.experts_per_tok = c.num_experts_per_tok;
  m.expert_params = 3 * h * c.moe_intermediate_size;
  // An MoE layer's weights other than the routed experts: router, shared
  // expert and its gate.
  const int64_t moe_fixed = m.moe_layers == 0 ? 0
                                              : c.num_experts * h +
                                                    3 * h * c.shared_expert_intermediate_size +
                                                    (c.shared_expert_intermediate_size > 0 ? h : 0);
  m.layer_matmul_params = c.num_layers * (h * q + 2 * h * kv + q * h) + dense_layers * dense_mlp +
                          m.moe_layers * (moe_fixed + m.experts_per_tok * m.expert_params);
  m.lm_head_params = c.vocab_size * h;
  m.vocab_size = c.vocab_size;
  const int64_t layers = c.num_layers * (attn + norms) + dense_layers * dense_mlp +
                         m.moe_layers * moe_fixed;
  const int64_t embedding = c.vocab_size * h;
  m.num_params = embedding + layers + m.moe_layers * m.num_experts * m.expert_params + h +
                 (c.tie_word_embeddings ? 0 : m.lm_head_params);
  m.decode_weight_params = layers + h + m.lm_head_params;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const bool sliding = c.sliding_window > 0 && static_cast<size_t>(l) < c.sliding_layers.size() &&
                         c.sliding_layers[static_cast<size_t>(l)];
    (sliding ? m.sliding_kv_elems_per_token : m.kv_elems_per_token) += 2 * kv;
  }
  m.sliding_window = c.sliding_window;
  m.num_layers = c.num_layers;
  m.num_heads = c.num_heads;
  m.num_kv_heads = c.num_kv_heads;
  m.head_dim = d;
  return m;
}

double decode_weight_params_at(const ModelCost& cost, int64_t batch) {
  double params = static_cast<double>(cost.decode_weight_params);
  if (cost.moe_layers > 0 && cost.num_experts > 0) {
    const double e = static_cast<double>(cost.num_experts);
    const double k = static_cast<double>(cost.experts_per_tok);
    const double distinct = e * (1.0 - std::pow(1.0 - k / e, static_cast<double>(batch)));
    params += static_cast<double>(cost.moe_layers) * distinct * static_cast<double>(cost.expert_params);
  }
  return params;
}

double kv_elems_read(const ModelCost& cost, double context_len) {
  const double window = std::min(context_len, static_cast<double>(cost.sliding_window));
  return context_len * static_cast<double>(cost.kv_elems_per_token) +
         window * static_cast<double>(cost.sliding_kv_elems_per_token);
}

double decode_bytes_per_step(const ModelCost& cost, double bytes_per_weight,
                             double bytes_per_kv_elem, int64_t batch, double context_len) {
  return decode_weight_params_at(cost, batch) * bytes_per_weight +
         static_cast<double>(batch) * kv_elems_read(cost, context_len) * bytes_per_kv_elem;
}

double decode_bytes_per_rank(const ModelCost& cost, double bytes_per_weight,
                             double bytes_per_kv_elem, int64_t batch, double context_len, int tp) {
  if (tp <= 1) return decode_bytes_per_step(cost, bytes_per_weight, bytes_per_kv_elem, batch, context_len);
  const auto lm_head = static_cast<double>(cost.lm_head_params);
  const double layers = decode_weight_params_at(cost, batch) - lm_head;
  const double kv_share = cost.num_kv_heads >= tp || cost.num_kv_heads == 0
                              ? 1.0 / tp
                              : 1.0 / static_cast<double>(cost.num_kv_heads);
  const double head_block = cost.vocab_size > 0
                                ? lm_head / static_cast<double>(cost.vocab_size) *
                                      static_cast<double>((cost.vocab_size + tp - 1) / tp)
                                : lm_head / tp;
  return (layers / tp + head_block) * bytes_per_weight +
         static_cast<double>(batch) * kv_elems_read(cost, context_len) * kv_share *
             bytes_per_kv_elem;
}

double prefill_flops(const ModelCost& cost, int64_t tokens) {
  const auto t = static_cast<double>(tokens);
  return 2.0 * static_cast<double>(cost.layer_matmul_params) * t +
         2.0 * static_cast<double>(cost.lm_head_params) +
         2.0 * static_cast<double>(cost.num_layers * cost.num_heads * cost.head_dim) * t * t;
}

}  // namespace pagoda::bench
