#include "openai/reasoning/reasoning_constraint.h"

#include <algorithm>
#include <string>

#include "sample/reasoning_gate.h"

namespace pagoda::openai {

namespace {

// Enough prompt tokens to hold the generation prompt's think markers and the
// whitespace around them.
constexpr size_t kPromptTailTokens = 64;

}  // namespace

std::shared_ptr<const CompiledConstraint> gate_after_reasoning(
    std::shared_ptr<const CompiledConstraint> constraint, const ReasoningParser& parser,
    const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids, int64_t vocab_size) {
  if (!constraint) return constraint;
  const size_t tail = std::min(prompt_ids.size(), kPromptTailTokens);
  const PromptThinkState state =
      prompt_think_state(tokenizer.decode(prompt_ids.last(tail), /*skip_special_tokens=*/false));
  ReasoningGateOptions options;
  options.vocab_size = vocab_size;
  if (!parser.starts_in_reasoning(state)) {
    if (state == PromptThinkState::kClosed) return constraint;
    options.open_id = tokenizer.token_to_id(kThinkOpen);
    if (!options.open_id) return constraint;
  }
  if (auto id = tokenizer.token_to_id(kThinkClose)) {
    options.end_ids = {*id};
  } else {
    options.end_ids = tokenizer.encode(kThinkClose, /*add_special_tokens=*/false);
  }
  return make_reasoning_gate(std::move(constraint), std::move(options));
}

}  // namespace pagoda::openai
