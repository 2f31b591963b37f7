// Proposer: where speculative decoding's draft tokens come from
// (docs/speculative-decoding.md). Each step the engine asks the proposer for
// drafts of the sequences that may speculate; the target model then verifies
// every drafted position in one forward (sched: Scheduler::set_draft and
// verify_draft) and keeps the longest prefix of drafts that equals its own
// samples, plus its sample at the first mismatch. Outputs therefore never
// depend on the proposer: only how many tokens one step yields does.
//
// All calls come from the engine thread, in this order for a sequence:
// on_fork if it is a fork, propose (any number of steps), on_verified after
// each step it was drafted in, then on_sequence_end once. A sequence id is
// never reused.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"

namespace pagoda {

// One sequence that may be drafted this step.
struct DraftInput {
  int64_t seq_id = 0;  // the scheduler's SeqId
  // Prompt, then the outputs; the last token is sampled but not yet computed
  // (the drafts follow it). Valid only during propose().
  std::span<const int32_t> tokens;
  int32_t num_prompt_tokens = 0;
  int32_t max_draft = 0;  // >= 1: propose at most this many tokens
};

// Of on_hidden_states: the sequence's prefix as the target's prefix cache
// keys it (kv/kv_manager.h), so that a proposer can key state of its own
// that depends only on the tokens (an EAGLE head's KV) by the same content.
struct HiddenRowsPrefix {
  // The sequence's tokens from position 0 through the forward's last
  // non-draft position: first_pos + n minus the forward's drafts. Every one
  // is computed by now or by this forward (none will change). Valid during
  // the call; empty where the engine has no such sequence.
  std::span<const int32_t> tokens;
  // The request's prefix-cache extra keys (RequestSpec::cache_keys: LoRA
  // adapter, cache salt); empty for none. Valid during the call.
  std::span<const uint64_t> cache_keys;
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  // drafts is resized to inputs.size(); drafts[i] receives at most
  // inputs[i].max_draft tokens (ids of the target's vocabulary) proposed to
  // follow inputs[i].tokens, possibly none. An error (e.g. a draft model's
  // step failed) leaves the step undrafted; the engine logs it.
  virtual Status propose(std::span<const DraftInput> inputs,
                         std::vector<std::vector<int32_t>>& drafts) = 0;
  // Whether propose() could draft for in.seq_id once one more token, not
  // known yet, follows in.tokens (all known): false only where no such token
  // yields a draft. Async scheduling asks it before holding a step for a
  // sample's drafts (their search needs that step's token on the host,
  // so the next step is not planned ahead of it): where this says false the
  // step is not held and the sample is not drafted. True (the default) is
  // always correct; a proposer that can tell cheaply spares the hold. May
  // update per-sequence state as propose() does; `in.max_draft` is unused.
  virtual bool may_draft_after_next_token(const DraftInput& in) {
    (void)in;
    return true;
  }
  // Whether the engine hands this proposer the target's hidden states
  // (on_hidden_states after every forward it launches); false: never.
  virtual bool wants_hidden_states() const { return false; }
  // Right after the engine launched a forward, for each of its sequences:
  // `rows` [n, H] (the target's compute dtype, on its backend) are that
  // forward's final normed hidden states -- what its lm_head reads -- of
  // seq_id's positions [first_pos, first_pos + n). Valid until the next
  // launch (ops enqueued now read them in stream order). Rows of drafts the
  // step then rejects are among them: only positions below the tokens the
  // sequence keeps computed are the model's. `aux_row`: the row of the
  // views on_aux_hidden_states got for this forward that holds first_pos's
  // aux rows (the n positions' rows are consecutive there), or -1 where the
  // target keeps none. `prefix`: the sequence's tokens and cache keys.
  virtual void on_hidden_states(int64_t seq_id, int32_t first_pos, const Tensor& rows,
                                int32_t aux_row, const HiddenRowsPrefix& prefix) {
    (void)seq_id, (void)first_pos, (void)rows, (void)aux_row, (void)prefix;
  }
  // Where the target keeps aux hidden states (RunnerOptions::aux_hidden_layers,
  // for EAGLE-3): right after the engine launched a forward and before that
  // forward's on_hidden_states calls, one [num_rows, H] view per aux layer of
  // the residual streams entering it, covering every row of the forward (rows
  // as hidden_states()); valid as on_hidden_states' `rows`.
  virtual void on_aux_hidden_states(std::span<const Tensor> aux) { (void)aux; }
  // Of the num_drafted tokens proposed for seq_id last, the first
  // num_accepted were accepted (adaptive proposers learn from it).
  virtual void on_verified(int64_t seq_id, int32_t num_drafted, int32_t num_accepted) {
    (void)seq_id, (void)num_drafted, (void)num_accepted;
  }
  // child was just forked from parent (the samples 1.. of an n > 1 request,
  // right after their shared prompt's prefill): it holds parent's tokens
  // and KV, then its own sampled token; called before any step computes
  // child. A proposer may start child's state from parent's.
  virtual void on_fork(int64_t parent, int64_t child) { (void)parent, (void)child; }
  // The sequence ended (finished, aborted or dropped) with these tokens
  // (prompt, then outputs); per-sequence state is dropped.
  virtual void on_sequence_end(int64_t seq_id, std::span<const int32_t> tokens,
                               int32_t num_prompt_tokens) {
    (void)seq_id, (void)tokens, (void)num_prompt_tokens;
  }
};

}  // namespace pagoda
