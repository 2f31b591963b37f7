#include "engine/constrained_draft.h"

#include <memory>

#include "engine/jump_forward.h"

namespace pagoda {

namespace {

bool allows(std::span<const uint32_t> allowed, int32_t token) {
  if (allowed.empty()) return true;
  const auto word = static_cast<size_t>(token) / 32;
  return word < allowed.size() && ((allowed[word] >> (static_cast<uint32_t>(token) % 32)) & 1u);
}

}  // namespace

size_t allowed_draft_length(std::span<const int32_t> draft, const DraftLimits& limits) {
  std::unique_ptr<TokenConstraint> state = limits.constraint ? limits.constraint->clone() : nullptr;
  size_t n = 0;
  for (; n < draft.size(); ++n) {
    const int32_t token = draft[n];
    if (token < 0 || !allows(limits.allowed, token)) break;
    if (!state) continue;
    if (state->is_finished()) break;
    std::unique_ptr<TokenConstraint> before = limits.jump_tokenizer ? state->clone() : nullptr;
    if (!state->accept(token)) break;
    // on_token's call for this token, with the budget left after the drafts before it.
    if (before &&
        plan_jump_forward(*limits.jump_tokenizer, *before, *state, token, kJumpForwardMaxBytes,
                          limits.max_tokens_left - static_cast<int32_t>(n))) {
      break;
    }
  }
  return n;
}

}  // namespace pagoda
