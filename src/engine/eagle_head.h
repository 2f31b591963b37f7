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
  int64_t num_layers = 0;   // L, the target's decoder layers (EAGLE-3's aux layer ids)
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

// ---- EAGLE-3 ------------------------------------------------------------------
// An EAGLE-3 head ("method": "eagle3") as published for Llama targets (e.g.
// yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, as vLLM's Eagle3LlamaForCausalLM reads
// it): config.json of a one-layer Llama (architectures LlamaForCausalLMEagle3
// or similar) with draft_vocab_size (Vd; absent: V) and optionally
// eagle_config.eagle_aux_hidden_state_layer_ids, and the tensors
//   fc.weight                              [H, 3H] over concat(aux_0, aux_1, aux_2)
//   midlayer.input_layernorm.weight        [H]     norms the token embedding
//   midlayer.hidden_norm.weight            [H]     norms the hidden input
//   midlayer.self_attn.{q,k,v}_proj.weight [Hq D | Hkv D, 2H] over
//                                          concat(input_layernorm(e), hidden_norm(g))
//   midlayer.self_attn.o_proj.weight       [H, Hq D]
//   midlayer.post_attention_layernorm.weight, midlayer.mlp.{gate,up,down}_proj.weight
//   norm.weight [H], lm_head.weight [Vd, H]
//   d2t [Vd] integer: target id = draft id + d2t[draft id]
//   t2d [V] bool (optional, unused: d2t alone maps drafts)
//   embed_tokens.weight [V, H] (optional: the target's otherwise)
// Names may carry a "model." prefix.
//
// One step, row t = (token x_t, hidden input g_t [H]):
//   g_t = fc(concat(aux rows of the target at position p_t)) for a target row,
//         or the head's own pre-norm output r of the previous draft (chained)
//   a = attention(concat(input_layernorm(embed(x_t)), hidden_norm(g_t)))
//   r = g_t + a;  r += swiglu(post_attention_layernorm(r))
//   logits = lm_head(norm(r)) over the draft vocabulary, mapped through d2t.
// aux_j is the target's residual stream entering layer aux_layer_ids[j] (the
// sum of the embedding and every earlier layer's outputs, before any norm).

// The EAGLE-3 fields of a head's config.json.
struct Eagle3Fields {
  int64_t draft_vocab_size = 0;             // Vd
  std::vector<int64_t> aux_layer_ids;       // three target layer ids, in fc's column order
};

// The reference's default aux layers of an L-layer target: {2, L / 2, L - 3}.
std::vector<int64_t> eagle3_default_aux_layers(int64_t num_target_layers);

// Reads draft_vocab_size (absent: target.vocab_size) and
// eagle_config.eagle_aux_hidden_state_layer_ids (absent: the default) from
// the text of the head's config.json. Errors name the field: a draft
// vocabulary outside [1, V], layer ids not three distinct ids in [0, L).
Result<Eagle3Fields> parse_eagle3_fields(const std::string& config_json,
                                         const EagleHeadTarget& target);

// The head's weights in f32 on the host (as EagleHead).
struct Eagle3Head {
  ModelConfig config;                 // the head's config.json
  Eagle3Fields fields;
  std::vector<float> fc;              // [H, 3H]
  std::vector<float> input_norm;      // [H]
  std::vector<float> hidden_norm;     // [H]
  std::vector<float> q_proj;          // [Hq D, 2H]
  std::vector<float> k_proj;          // [Hkv D, 2H]
  std::vector<float> v_proj;          // [Hkv D, 2H]
  std::vector<float> o_proj;          // [H, Hq D]
  std::vector<float> post_attn_norm;  // [H]
  std::vector<float> gate_proj;       // [I, H]
  std::vector<float> up_proj;         // [I, H]
  std::vector<float> down_proj;       // [H, I]
  std::vector<float> norm;            // [H]
  std::vector<float> lm_head;         // [Vd, H]
  std::vector<int32_t> draft_to_target;  // [Vd]: d + d2t[d], each in [0, V)
  std::vector<float> embed_tokens;    // [V, H], or empty: the target's
};

// Checks an EAGLE-3 head's config and tensors against `target` and reads
// them. Errors are kInvalidArgument naming the offending thing, as
// load_eagle_head's, and a d2t entry mapping outside the target's vocabulary
// (the entry and where it lands).
Result<Eagle3Head> load_eagle3_head(const ModelConfig& config, const Eagle3Fields& fields,
                                    WeightSource& weights, const EagleHeadTarget& target);

}  // namespace pagoda
