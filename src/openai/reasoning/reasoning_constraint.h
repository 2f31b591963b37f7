// Structured output for reasoning models: the request's constraint applies to
// the answer only, after the reasoning (sample/reasoning_gate.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "openai/reasoning/reasoning_parser.h"
#include "sample/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

// The constraint a request of a server with reasoning parser `parser` runs
// under, for `constraint` (null: unconstrained, returned as is) and the
// prompt `prompt_ids`, over a logits vocabulary of `vocab_size` tokens.
// By where the prompt leaves the reasoning (prompt_think_state of the text of
// its last tokens) and what the parser expects, as ReasoningParser splits
// the text:
// - it starts in the reasoning (the prompt ends with <think>, or deepseek_r1
//   and no marker): every token is allowed until the ids of "</think>" are
//   sampled, then `constraint` applies from its start;
// - the prompt ends with </think> (enable_thinking false): `constraint` itself,
//   from the first token;
// - qwen3 and no marker: the first token is "<think>" (then as the first case)
//   or the answer's first under `constraint`; when "<think>" is not one token
//   of the vocabulary, `constraint` from the first token.
// The marker ids are the vocabulary's "<think>" / "</think>" tokens (every
// reasoning model has them); a vocabulary without "</think>" uses its
// encoding of the text.
std::shared_ptr<const CompiledConstraint> gate_after_reasoning(
    std::shared_ptr<const CompiledConstraint> constraint, const ReasoningParser& parser,
    const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids, int64_t vocab_size);

}  // namespace pagoda::openai
