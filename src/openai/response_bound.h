// The response-size bound (--max-response-bytes): a non-streamed answer is
// built in memory and written at once, so a request whose answer could grow
// past the bound is refused up front, before any generation. Streamed answers
// are not bounded (each event is small).
#pragma once

#include <cstdint>
#include <optional>

#include "openai/api_error.h"

namespace pagoda::openai {

inline constexpr int64_t kDefaultMaxResponseBytes = int64_t{64} << 20;

// What sizes a non-streamed response.
struct ResponseShape {
  bool chat = false;             // chat logprobs entries (with a `bytes` array), else completions arrays
  int64_t num_choices = 0;       // prompts × n
  int64_t max_tokens = 0;        // generated tokens per choice, at most
  int logprobs = -1;             // alternatives per generated token; -1: no logprobs
  int64_t echo_bytes = 0;        // prompt text echoed, summed over choices
  int64_t echo_tokens = 0;       // prompt tokens scored in the echo, summed over choices (needs logprobs >= 0)
  // Prompt tokens the response lists (prompt_logprobs, prompt_token_ids):
  // per choice in completions, once in chat.
  int64_t prompt_tokens = 0;
  int prompt_logprobs = -1;  // alternatives per prompt token in prompt_logprobs; -1: none
  bool token_ids = false;    // return_token_ids: prompt and generated token ids
  // Chat with a reasoning parser: a token's text may be reasoning, written
  // twice (reasoning_content and reasoning).
  bool reasoning = false;
};

// Upper bound of the response's JSON size for ordinary tokens: each token's
// text at most min(max_token_bytes, 16) bytes, escaped to at most twice that
// plus 6 (one \u00XX escape); each logprob number at most 24 characters;
// every key, bracket and separator of the shapes in logprobs_format.h
// counted; token ids at most 11 bytes each, prompt_logprobs entries
// {"id": {"logprob", "rank", "decoded_token"}} per alternative. On stories260K (longest piece 9
// bytes) completions with logprobs 20 estimate 1,183 bytes per generated token against 525 measured
// (docs/api.md).
int64_t estimate_response_bytes(const ResponseShape& shape, int64_t max_token_bytes);

// A 400 naming max_tokens, n, logprobs and the bound when the estimate
// exceeds `max_response_bytes`.
std::optional<ApiError> check_response_size(const ResponseShape& shape, int64_t max_token_bytes,
                                            int64_t max_response_bytes);

}  // namespace pagoda::openai
