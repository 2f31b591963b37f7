// Speculative decoding under structured output: how much of a proposer's
// draft a constrained sample may be verified with. Each verification row of
// a constrained sample is masked by the constraint's state after the drafts
// before it (row_planner.h), so a draft the constraint refuses could never
// be kept; the draft is cut before it. Jump-forward (jump_forward.h) would
// replace a sampled token after which bytes are forced: a draft that is kept
// is never replaced (only a verification's last token is), so for the
// output to equal the one without speculation the draft is cut before such a
// token too -- the target then samples it on the last row, where
// jump-forward acts as without speculation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "sample/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

struct DraftLimits {
  // The sample's constraint state after its outputs (null: unconstrained).
  const TokenConstraint* constraint = nullptr;
  // allowed_token_ids packed (sample/token_mask.h); empty: every token.
  std::span<const uint32_t> allowed;
  // Non-null when the sample jumps forward (LlmEngine::jumps_forward): the
  // tokenizer plan_jump_forward re-tokenises with.
  const Tokenizer* jump_tokenizer = nullptr;
  // The sample's output budget left before the draft (jump-forward's bound).
  int32_t max_tokens_left = 0;
};

// The length of the longest prefix of `draft` whose tokens allowed_token_ids
// allows and the constraint accepts in order, ending after a token that
// finishes the constraint (nothing may follow it) and, with jump-forward,
// before a token that jump-forward would replace. Reads `limits.constraint`
// through a clone; changes nothing.
size_t allowed_draft_length(std::span<const int32_t> draft, const DraftLimits& limits);

}  // namespace pagoda
