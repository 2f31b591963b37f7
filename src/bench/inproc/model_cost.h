// What one forward pass of a decoder (the dense Llama / Qwen families and the
// mixtures of experts) costs in memory traffic and arithmetic, from its
// config alone: the numerators of the speed-of-light ratios in
// /work/shared/BENCHMARKS.md.
#pragma once

#include <cstdint>

#include "io/model_config.h"

namespace pagoda::bench {

struct ModelCost {
  int64_t num_params = 0;  // every weight (embedding and lm_head once each if untied)
  int64_t decode_weight_params =
      0;  // weights one decode step reads, routed experts aside (decode_weight_params_at):
          // all but the embedding table (only a row per token is gathered);
          // lm_head counts even when tied
  int64_t layer_matmul_params = 0;  // q, k, v, o, gate, up, down (MoE: router, the top-k
                                    // experts and the shared expert) weights one token uses
  int64_t lm_head_params = 0;       // vocab * hidden
  int64_t vocab_size = 0;
  // KV elements one cached token holds: 2 (k, v) * kv_heads * head_dim per
  // layer, over the full-attention layers and, apart, the sliding-window
  // layers, which read at most sliding_window positions back.
  int64_t kv_elems_per_token = 0;
  int64_t sliding_kv_elems_per_token = 0;
  int64_t sliding_window = 0;
  int64_t num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  // Mixtures of experts: the layers with routed experts, E, top-k and one
  // expert's gate + up + down weights (0 for dense models).
  int64_t moe_layers = 0, num_experts = 0, experts_per_tok = 0, expert_params = 0;
};

ModelCost model_cost(const ModelConfig& config);

// Weights one decode step of `batch` sequences reads: decode_weight_params
// plus, in each MoE layer, the experts the batch selects. With routing taken
// as uniform and independent per token (random weights come close), a batch
// selects E * (1 - (1 - k/E)^batch) distinct experts in expectation: k at
// batch 1 (the active-weight speed of light), all E for large batches.
double decode_weight_params_at(const ModelCost& cost, int64_t batch);

// KV elements one sequence's decode step reads at `context_len` cached
// tokens: every full-attention layer's context_len positions and every
// sliding layer's min(context_len, sliding_window).
double kv_elems_read(const ModelCost& cost, double context_len);

// Bytes one decode step of `batch` sequences reads at `context_len` cached
// tokens each: decode weights (decode_weight_params_at) + the KV cache of
// every sequence (kv_elems_read).
double decode_bytes_per_step(const ModelCost& cost, double bytes_per_weight,
                             double bytes_per_kv_elem, int64_t batch, double context_len);

// What one GPU of a tensor-parallel group of `tp` reads in that step
// (docs/parallelism.md): its 1/tp of the layers' weights, its
// vocab-parallel block of the lm_head (ceil(vocab / tp) rows), and the KV of
// its kv heads (Hkv/tp of them, or one replicated head when Hkv < tp).
// Pipeline stages run one after another for a step, so this is also the
// bytes on a step's critical path with pipeline parallelism. tp = 1:
// decode_bytes_per_step.
double decode_bytes_per_rank(const ModelCost& cost, double bytes_per_weight,
                             double bytes_per_kv_elem, int64_t batch, double context_len, int tp);

// FLOPs of prefilling one prompt of `tokens` tokens: 2 * layer matmul
// params * tokens, the lm_head for the last token only, and causal attention
// (QK^T and PV over half the T x T score matrix: 2 * layers * heads *
// head_dim * T^2).
double prefill_flops(const ModelCost& cost, int64_t tokens);

}  // namespace pagoda::bench
