// Jump-forward for structured output: where the constraint admits a single
// continuation after a sampled token, the engine appends it without sampling
// it. The sampled token x is not yet fed to the model, so the boundary is
// re-tokenised: x is replaced by T = the continuation tokens of bytes(x) +
// forced bytes (Tokenizer::encode_continuation), which the next step feeds
// as one chunk (Scheduler::replace_last_token). docs/structured-output.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sample/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

// Forced bytes looked at after one sampled token (the jump's bound).
inline constexpr size_t kJumpForwardMaxBytes = 64;

struct JumpForward {
  std::vector<int32_t> tokens;             // T, replacing the sampled token
  std::unique_ptr<TokenConstraint> state;  // the constraint after T
};

// The jump after `token`: `before` is the sample's constraint state before
// it, `after` the same state having accepted it. The text is bytes(token) +
// after.forced_bytes(max_bytes), cut after its last whole UTF-8 character;
// T is its continuation tokenisation, cut to at most max_tokens tokens (the
// sample's output budget left, >= 1). nullopt, and the caller keeps `token`
// and `after`, when nothing is forced, the cut text adds nothing to
// bytes(token) or starts inside a character, T does not spell the text
// exactly (token_bytes), T is just `token`, or `before` refuses T's tokens
// in order (the re-tokenised boundary leaves the constraint).
std::optional<JumpForward> plan_jump_forward(const Tokenizer& tok, const TokenConstraint& before,
                                             const TokenConstraint& after, int32_t token,
                                             size_t max_bytes, int32_t max_tokens);

}  // namespace pagoda
