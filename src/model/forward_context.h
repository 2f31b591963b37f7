// What a family's forward reads and writes in one step of T tokens. Every
// tensor is a view of memory the ModelRunner owns (scratch, index arrays,
// KV pool, rope table); the runner builds a context per forward call, and
// the same views are used when a decode graph is captured, so a forward
// must only enqueue backend ops on them (no allocation, no host reads).
#pragma once

#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "io/model_config.h"

namespace pagoda {

// H = hidden, I = intermediate (dense MLP), D = head dim, Hq = query heads,
// Q = layout.row_width() = (Hq + 2 Hkv) D. Activations are in the
// backend's compute dtype (cd). Under tensor parallelism Hq, Hkv and I (and
// so Q) are the rank's shard (tensor_parallel.h); `config` keeps the whole
// model's sizes.
struct ForwardContext {
  Backend& backend;
  const ModelConfig& config;  // a family's other hyper-parameters (the whole model's)
  Communicator* tp;           // the tensor-parallel group; nullptr: the whole model here
  Communicator* pp;           // the pipeline (rank = this stage); nullptr: every layer here
  QkvLayout layout;           // of `qkv` and the KV caches
  float attention_scale;      // softmax scale of paged_attention
  float eps;                  // config.rms_norm_eps

  // Step inputs on the device.
  Tensor ids;                        // [T] i32 token ids
  Tensor positions;                  // [T] i32
  Tensor slots;                      // [T] i32 KV slot of each token
  const AttentionMetadata& meta;     // the step's sequences
  Tensor cos_sin;                    // [max_model_len, R] f32 rope table (R = config.rope_dim())
  Tensor cos_sin_local;              // the same for sliding layers with their own base
                                     // (config.rope_local_base_freq > 0); empty otherwise
  std::vector<KvCacheView>& caches;  // [num_layers] (of this pipeline stage: weights.layers[i]'s)
  int64_t first_layer = 0;           // global index of caches[0] (pipeline stage)
  // The sliding-window KV group (RunnerOptions::sliding_kv_group): the
  // sliding layers' caches (config.sliding_layers) are views into that
  // group's pool, written at these slots and read through these tables;
  // empty / nullptr without it (every layer uses `slots` and `meta`).
  Tensor sliding_slots{};                           // [T] i32
  const AttentionMetadata* sliding_meta = nullptr;  // `meta` with the sliding group's tables

  // Scratch, [T, *] cd. The forward leaves the final normed hidden states
  // in `normed`; the runner reads them for the lm_head.
  Tensor residual;  // [T, H] the residual stream
  Tensor normed;    // [T, H] the normed input of the next block
  Tensor qkv;       // [T, Q]
  Tensor attn;      // [T, Hq D] attention output before o_proj
  Tensor proj;      // [T, H] a block's output (o_proj, down), added to `residual` by the next norm
  // Under tensor parallelism a row-parallel block (attention, the dense MLP)
  // leaves `proj` as this rank's partial sum and sets this; the next block op
  // that reads `proj` sums it over ctx.tp first (add_and_norm fuses the sum
  // with its add and norm: Communicator::all_reduce_add_rms_norm) and clears
  // it. Always false without tp.
  bool proj_partial = false;
  Tensor gate_up;   // [T, 2I]
  Tensor act;       // [T, I]

  // FP8 producer quantisation (RunnerOptions::fp8_producer): when an FP8
  // linear with dynamic per-token activations reads `normed` or `act`, the
  // op writing that activation also writes its codes and scales here
  // (rms_norm_fp8, add_rms_norm_fp8, silu_mul_fp8) and the linear reads them
  // (linear_fp8_rows). fp8_codes [T, max(H, I)] u8 (viewed as [T, K] for the
  // activation's K), fp8_scales [T] f32; both empty when the path is off.
  Tensor fp8_codes{};
  Tensor fp8_scales{};
  // Set by norm / add_and_norm when fp8_codes hold `normed`'s codes; the
  // linear that reads `normed` next clears it.
  bool normed_fp8 = false;

  // An EAGLE head's input (RunnerOptions::architecture, model/eagle.h): the
  // hidden-state pool [slots, H] cd, row s the hidden state that the token
  // written at KV slot s reads. Empty for other models, and in the runner's
  // memory profile step (before the pool exists).
  Tensor hidden_pool{};

  // RunnerOptions::aux_hidden_layers: layer aux_layers[j]'s incoming
  // residual goes to rows [0, T) of aux_hidden [n, max T, H] cd at [j]
  // (capture_aux_hidden). Empty for other runners.
  std::span<const int64_t> aux_layers{};
  Tensor aux_hidden{};

  // Mixture-of-experts scratch (empty for dense models): E experts, k routed
  // per token, Im each expert's intermediate size, Is the shared expert's.
  // The expert and shared views alias gate_up / act's memory.
  Tensor router_logits{};   // [T, E] f32
  Tensor topk_ids{};        // [T, k] i32
  Tensor topk_weights{};    // [T, k] f32
  Tensor expert_gate_up{};  // moe_experts_scratch_bytes(T, k, H) bytes (backend.h)
  Tensor expert_act{};      // [T k, Im]
  Tensor shared_gate_up{};  // [T, 2Is] (Qwen2-MoE's shared expert)
  Tensor shared_act{};      // [T, Is]
  Tensor shared_out{};      // [T, H]
};

}  // namespace pagoda
