// Tensor parallelism (Megatron-style): how a model's weights are split over
// the ranks of a tensor-parallel group, in one place. docs/parallelism.md
// ("How a model is sharded") explains the scheme; in short, for N ranks and
// rank r:
//  - attention: rank r holds the query heads [r Hq/N, (r+1) Hq/N) and their
//    key-value heads: [r Hkv/N, (r+1) Hkv/N) when Hkv >= N, else the single
//    head r Hkv/N (each kv head replicated on N/Hkv ranks). The fused qkv and
//    its bias are column-parallel (the rows of those heads); o_proj is
//    row-parallel (the columns of the rank's query heads).
//  - MLP: gate_up is column-parallel (rows [r I/N, (r+1) I/N) of gate_proj,
//    then the same rows of up_proj); down is row-parallel (those columns).
//  - lm_head: vocab-parallel: rank r holds the vocab rows tp_vocab(r), C =
//    tp_vocab_block() of them (zero rows pad the last rank's when N does not
//    divide the vocab), computes their logits, and the ranks gather the
//    full logits (Communicator::all_gather_columns) before sampling.
//  - embedding: vocab-parallel the same way (the same rows; one buffer with
//    the head when tied and not kept in blocks): the rank looks up the ids of
//    its rows, zeros for the others, and one all-reduce (sum) gives every rank
//    the full rows (exact: one rank contributes each row, x + 0 = x). With
//    PAGODA_REPLICATED_EMBEDDING=1 every rank holds all of it instead
//    (tp_vocab_parallel_embedding).
//  - replicated: every norm (Qwen3's q_norm / k_norm too) and the final norm.
//  - the forward all-reduces (sums) each row-parallel output (blocks.cpp).
#pragma once

#include <cstdint>

#include "core/result.h"
#include "io/model_config.h"

namespace pagoda {

class Backend;       // backend/backend.h
class Communicator;  // backend/communicator.h

// A half-open range [begin, end) of rows, columns or heads.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// One rank's place in a tensor-parallel group; {0, 1} is the whole model.
struct TpShard {
  int rank = 0;
  int size = 1;
};

// Whether `config` can be split over `tp_size` ranks: num_attention_heads
// and intermediate_size divisible by it, and num_key_value_heads divisible
// by it or dividing it. The error names the flag and the field, e.g.
// "--tensor-parallel-size 3 does not divide num_attention_heads 32". The
// engine calls this before loading anything; ModelRunner::create again.
Status validate_tensor_parallel(const ModelConfig& config, int tp_size);

// The rank's query heads, key-value heads and intermediate rows (global
// indices). Require validate_tensor_parallel(config, shard.size).
IndexRange tp_q_heads(const ModelConfig& config, TpShard shard);
IndexRange tp_kv_heads(const ModelConfig& config, TpShard shard);
IndexRange tp_intermediate(const ModelConfig& config, TpShard shard);
// The vocab-parallel lm_head: every rank's block of C = ceil(V / N) vocab
// rows, and rank r's real rows [r C, min((r + 1) C, V)) (empty for a rank
// past V when V < (N - 1) C + 1, as with a vocab smaller than N).
int64_t tp_vocab_block(const ModelConfig& config, int tp_size);
IndexRange tp_vocab(const ModelConfig& config, TpShard shard);
// Whether the embedding is split by vocab rows over `tp_size` ranks: when
// tp_size > 1, unless the environment sets PAGODA_REPLICATED_EMBEDDING to a
// value other than "" or "0" (the replicated table, for A/B comparison).
bool tp_vocab_parallel_embedding(int tp_size);

// `config` with the rank's own sizes: num_heads, num_kv_heads and
// intermediate_size of the shard (everything else as is). The runner sizes
// its QKV layout, scratch and KV pool from it; the query-to-kv-head mapping
// (q head h reads kv head h / (Hq / Hkv)) holds locally.
ModelConfig tp_local_config(const ModelConfig& config, TpShard shard);

// The smallest of every rank's `value` (0 <= value < 2^40), through one
// all-reduce on `backend` (each rank's value in its own slot, split in two
// exact f32 halves). Every rank of `tp` must call it together. Without tp
// (nullptr) returns value.
int64_t tp_min(Communicator* tp, Backend& backend, int64_t value);

}  // namespace pagoda
