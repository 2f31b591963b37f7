// EagleHead: an EAGLE-1 draft head (--speculative-config '{"method":
// "eagle", "model": DIR, ...}') in the published checkpoint layout of
// EAGLE for Llama (e.g. yuhuili/EAGLE-LLaMA3-Instruct-8B, as vLLM's
// EagleLlamaForCausalLM reads it): config.json of a one-layer Llama and
// the tensors
//   fc.weight                 [H, 2H]  input: concat(embed(token), target hidden)
//   fc.bias                   [H]      optional (EAGLE's own training code has one)
//   layers.0.self_attn.{q,k,v,o}_proj.weight, layers.0.post_attention_layernorm.weight,
//   layers.0.mlp.{gate,up,down}_proj.weight   a Llama decoder layer without input_layernorm
//                                             (one in the file is ignored, as EAGLE does)
//   embed_tokens.weight       [V, H]   optional: the target's embedding otherwise
// Names may carry a "model." prefix. The head has no final norm and no
// lm_head: its output hidden state goes through the target's lm_head.
//
// The draft step for position p reads the target's hidden state at p - 1 --
// the one its lm_head reads, after the final norm (EAGLE-1 trains on the
// base model's output features) -- and the token at p.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/model_config.h"
#include "io/weight_source.h"

namespace pagoda {

// What the head must match of the target.
struct EagleHeadTarget {
  std::string name;         // the target as named in errors
  int64_t hidden_size = 0;  // H
  int64_t vocab_size = 0;   // V, the target's logits width
};

// The head's weights in f32 on the host, row-major in PyTorch order
// ([out_features, in_features] for linear weights).
struct EagleHead {
  ModelConfig config;                 // the head's config.json
  std::vector<float> fc;              // [H, 2H]
  std::vector<float> fc_bias;         // [H] or empty
  std::vector<float> q_proj;          // [num_heads * head_dim, H]
  std::vector<float> k_proj;          // [num_kv_heads * head_dim, H]
  std::vector<float> v_proj;          // [num_kv_heads * head_dim, H]
  std::vector<float> o_proj;          // [H, num_heads * head_dim]
  std::vector<float> post_attn_norm;  // [H]
  std::vector<float> gate_proj;       // [I, H]
  std::vector<float> up_proj;         // [I, H]
  std::vector<float> down_proj;       // [H, I]
  std::vector<float> embed_tokens;    // [V, H], or empty: the target's
};

// Checks the head's config and tensors against `target` and reads them.
// Errors are kInvalidArgument naming the offending thing: a missing tensor
// (by its published name), a tensor of the wrong shape (both shapes), a
// hidden size or vocabulary unlike the target's (both sizes), more than one
// layer, or an architecture other than a Llama.
Result<EagleHead> load_eagle_head(const ModelConfig& config, WeightSource& weights,
                                  const EagleHeadTarget& target);

}  // namespace pagoda
