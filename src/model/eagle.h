// The EAGLE-1 draft head as a model family the ModelRunner runs
// (RunnerOptions::architecture; engine/eagle_proposer.h drafts with it).
// Checkpoint layout: engine/eagle_head.h (load_eagle_head checks it first).
//
// One step over T tokens, row t = (token x_t at position p_t, hidden h_t):
//   e = embed(x_t)                          (the head's embed_tokens, else the target's)
//   z = fc([e | h_t]) (+ fc bias)           fc [H, 2H], loaded as its two [H, H] halves
//   z += attention(z)                       layers.0 self_attn, no input_layernorm
//   z += swiglu(post_attention_layernorm(z))
// and z (no final norm) is left in ctx.normed, where the runner's lm_head
// -- the target's, RunnerOptions::shared_globals -- reads it. h_t is row
// slots[t] of ctx.hidden_pool: whoever fills the pool puts there the
// hidden state that token's row reads (the target's output at position
// p_t, or the head's own output for a chained draft).
#pragma once

namespace pagoda {

struct Architecture;

// name "eagle"; validate refuses q heads * head_dim != hidden_size (the fc
// half over the hidden state writes the attention scratch); the forward is a
// fixed sequence of backend ops (graph-capturable).
const Architecture& eagle_architecture();

}  // namespace pagoda
