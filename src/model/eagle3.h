// The EAGLE-3 draft head as a model family the ModelRunner runs
// (RunnerOptions::architecture; engine/eagle_proposer.h drafts with it).
// Checkpoint layout: engine/eagle_head.h (load_eagle3_head checks it first).
// The runner's config is the head's with vocab_size = the draft vocabulary
// Vd (lm_head [Vd, H], logits Vd wide); its token ids are the target's
// (RunnerOptions::input_vocab_size), embedded by the head's embed_tokens,
// else the target's (RunnerOptions::shared_globals).
//
// One step over T tokens, row t = (token x_t at position p_t, hidden input g_t):
//   e = input_layernorm(embed(x_t)),  n = hidden_norm(g_t)
//   qkv = q/k/v([e | n])                    as W[:, :H] e + W[:, H:] n (two linears, one add)
//   r = g_t + attention(qkv)                midlayer.self_attn
//   r += swiglu(post_attention_layernorm(r))
// then ctx.residual = r (the pre-norm output a chained draft reads as its
// g: ModelRunner::residual_states) and ctx.normed = norm(r), which the
// head's lm_head reads. g_t is row slots[t] of ctx.hidden_pool: whoever
// fills the pool puts there fc(the target's aux rows) or the head's own r.
// fc [H, 3H] is loaded as its three [H, H] column thirds
// (ModelWeights::eagle3_fc) but applied by the proposer, not here.
#pragma once

namespace pagoda {

struct Architecture;

// name "eagle3"; validate refuses other than one layer, q/k norms, and an
// intermediate size below Hq D + 2 Hkv D (the q/k/v half over the hidden
// input and the add's discarded norm share the MLP's gate_up scratch); load
// keeps q/k/v in the compute dtype (the add's norm weight is a view of
// them). The forward is a fixed sequence of backend ops (graph-capturable).
const Architecture& eagle3_architecture();

}  // namespace pagoda
