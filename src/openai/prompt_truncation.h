// vLLM's truncate_prompt_tokens and truncation_side, for /v1/completions and
// /v1/chat/completions: keep only k tokens of the tokenized prompt (of the
// rendered messages in chat), so usage.prompt_tokens counts what is left.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "openai/api_error.h"
#include "openai/field_reader.h"

namespace pagoda::openai {

struct PromptTruncation {
  // As sent: -1 (the longest prompt the context leaves room for) or >= 1.
  // Unset: the prompt is kept whole.
  std::optional<int64_t> num_tokens;
  bool keep_first = false;  // truncation_side "right"; default "left" keeps the last tokens

  bool active() const { return num_tokens.has_value(); }
};

// Reads truncate_prompt_tokens (an integer: -1 or >= 1) and truncation_side
// ("left" or "right"; needs truncate_prompt_tokens). Errors go to `reader`.
PromptTruncation read_prompt_truncation(FieldReader& reader);

// The number of tokens to keep: num_tokens, or for -1 max_model_len -
// max_output_tokens (vLLM's maximum input). 400 naming truncate_prompt_tokens
// when that exceeds the maximum input or is below 1. `max_output_param`
// names the field max_output_tokens came from (max_tokens or
// max_completion_tokens) in the message. Call only when active().
ApiResult<int64_t> truncation_length(const PromptTruncation& truncation, int64_t max_model_len,
                                     int64_t max_output_tokens, const char* max_output_param);

// Shortens `ids` to `keep` tokens from the side `truncation` names; true when
// tokens were dropped.
bool truncate_prompt(const PromptTruncation& truncation, int64_t keep, std::vector<int32_t>& ids);

}  // namespace pagoda::openai
