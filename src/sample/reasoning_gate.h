// The reasoning gate: a constraint that lets a reasoning model think freely
// and constrains only its answer. It wraps another compiled constraint and
// allows every token (the full mask) until the end-of-reasoning token
// sequence (the ids of "</think>") has been sampled; from the next token on
// it enforces the inner constraint from its start state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sample/token_constraint.h"

namespace pagoda {

struct ReasoningGateOptions {
  // The tokens that end the reasoning, in order (non-empty).
  std::vector<int32_t> end_ids;
  // Tokens of the logits' vocabulary: the full mask allows ids [0, vocab_size).
  int64_t vocab_size = 0;
  // Set: the output reasons only when it opens with this one token (qwen3's
  // "<think>"). The first step then allows this token and every token the
  // inner constraint allows first; sampling it starts the reasoning, any
  // other token is the answer's first, under the inner constraint. Unset: the
  // output starts inside the reasoning (the prompt opened it, or deepseek_r1
  // models that may omit the opening marker).
  std::optional<int32_t> open_id;
};

// Wraps `inner` (not null) in the gate. Thread-safe like every
// CompiledConstraint; each start() is an independent sample's state.
std::shared_ptr<const CompiledConstraint> make_reasoning_gate(
    std::shared_ptr<const CompiledConstraint> inner, ReasoningGateOptions options);

}  // namespace pagoda
