// RunnerOptions: the sizes and memory budget a ModelRunner is created with.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kv_cache_dtype.h"

namespace pagoda {

struct Architecture;  // architecture.h
struct ModelWeights;  // weights.h

class Communicator;  // backend/communicator.h

struct RunnerOptions {
  // Tokens per KV block.
  int block_size = 16;
  // The KV cache's element type (--kv-cache-dtype, core/kv_cache_dtype.h): auto
  // = the backend's compute dtype; fp8 = e4m3 with the checkpoint's k/v
  // scales, else 1.0.
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  // KV blocks (of the full-attention group when there are two groups); 0:
  // derived from the memory budget (kv_cache_bytes when set, else cpu:
  // kv_budget.h's cpu_kv_budget, cuda: kv_cache_memory_fraction of total
  // memory).
  int64_t num_kv_blocks = 0;
  // A model with both sliding-window and full-attention layers (Gemma 2/3)
  // keeps its sliding layers' KV in a second pool that holds only the window
  // (kv/kv_manager.h, "KV groups"; the two pools are sized by kv_budget.h's
  // split_kv_budget / kv_pools_for_blocks), and every step must carry that
  // group's tables. false: every layer keeps its whole context in one pool
  // (the draft-model runner, whose KvManager has one group). No effect on
  // other models.
  bool sliding_kv_group = false;
  // T limit of one step; the activation scratch is sized for it.
  int64_t max_num_batched_tokens = 2048;
  // S limit of one step; also the rows of one lm_head + sampling chunk (the
  // number of logits rows R itself is unlimited).
  int64_t max_num_seqs = 256;
  // 0: the config's max_position_embeddings, capped to what the KV cache holds.
  int64_t max_model_len = 0;
  // cuda: gpu_memory_utilization, the fraction of total device memory this
  // runner may use (weights + activations + KV); memory other processes held
  // when it started does not count (device_kv_budget_bytes).
  double kv_cache_memory_fraction = 0.9;
  // KV cache budget in bytes on any backend (--kv-cache-memory-bytes); 0:
  // derived as above.
  int64_t kv_cache_bytes = 0;
  // Backends with graphs (cuda): true runs every step eagerly; false captures
  // decode graphs at startup (see decode_graphs.h; verification graphs below).
  bool enforce_eager = false;
  // With graphs (not enforce_eager): > 1 also captures verification graphs
  // for steps whose sequences have at most this many new tokens each
  // (verify_graphs.h; speculative decoding sets num_speculative_tokens + 1).
  // 0 or 1: none.
  int32_t verify_graph_query_len = 0;
  // Linear weights stored in quantization blocks (GGUF Q4_0..Q6_K, AWQ / GPTQ
  // modules as group formats) stay in
  // their blocks on the device and Backend::linear computes from them; false
  // dequantizes them to the compute dtype at load (--gguf-dequantize).
  bool keep_weight_blocks = true;
  // FP8 linears with dynamic per-token activations (backend/linear_weight.h)
  // take their activation codes from the op that produces the activation
  // (the RMSNorm before qkv / gate_up, silu_mul before down: blocks.h)
  // instead of quantising it themselves: the same results, fewer launches.
  // The runner also turns it off when PAGODA_FP8_PRODUCER=0 (the A/B switch).
  bool fp8_producer = true;
  // An EAGLE head (model/eagle.h): the family to run instead of the one
  // config.architecture names (null: that one). The runner then also keeps
  // a hidden-state pool, [(num_kv_blocks + 1) * block_size, H] in the compute
  // dtype, one row per KV slot (hidden_pool()), which the head's forward
  // reads at each token's slot.
  const Architecture* architecture = nullptr;
  // Weights another runner on the same backend owns and this one reads:
  // its lm_head and its embedding, each where this model loaded none (an
  // EAGLE-1 head shares both, an EAGLE-3 head the embedding unless it has
  // one). Must outlive this runner. null: none.
  const ModelWeights* shared_globals = nullptr;
  // An EAGLE-3 head's target (engine/eagle_head.h): the decoder layers whose
  // incoming residual stream -- the embedding plus every earlier layer's
  // block outputs, before any norm -- each forward also copies into
  // aux_hidden_states(), [aux_hidden_layers.size(), max_num_batched_tokens,
  // H] in the compute dtype, in this order. Distinct ids in [0, num_layers);
  // llama-decoder families (llama_decoder.h) on one GPU only. Empty: none.
  std::vector<int64_t> aux_hidden_layers;
  // Token ids a step may carry are [0, input_vocab_size); 0: the model's
  // vocab_size. An EAGLE-3 head reads the target's ids (its embedding is
  // [V, H]) while its logits are over its draft vocabulary (vocab_size Vd).
  int64_t input_vocab_size = 0;
  // Tensor parallelism (docs/parallelism.md): this runner holds rank
  // tp->rank()'s shard of tp->size() (query heads, kv heads and the
  // intermediate size split; kv heads replicated when fewer than the ranks)
  // and all-reduces each row-parallel projection through tp. Every rank's
  // runner gets the same step and samples the same tokens. nullptr: the
  // whole model on this backend.
  Communicator* tp = nullptr;
  // Pipeline parallelism (docs/parallelism.md, pipeline_parallel.h): this
  // runner is stage pp->rank() of pp->size(): it holds that stage's layers
  // (and their KV caches), receives the hidden states from stage rank - 1 and
  // sends them to rank + 1; only the last stage computes logits and samples.
  // With tp too, tp is this stage's tensor-parallel group and pp the ranks
  // with this tp rank across the stages. nullptr: every layer here.
  Communicator* pp = nullptr;
};

}  // namespace pagoda
