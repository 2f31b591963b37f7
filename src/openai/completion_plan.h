// /v1/completions request → what to generate: tokenized prompts, resolved
// SamplingParams and the response options (echo, logprobs, stream).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "openai/api_error.h"
#include "openai/sampling_request.h"
#include "openai/service_context.h"

namespace pagoda::openai {

struct CompletionPlan {
  std::vector<std::vector<int32_t>> prompts;  // one engine request each
  std::vector<std::string> prompt_texts;      // per prompt: the text echo prepends
  SamplingRequest request;                    // request.params: the same for every prompt
  bool echo = false;
  bool echo_only = false;  // max_tokens 0 with echo: the prompt only, no completion tokens
  // return_token_ids: each choice carries prompt_token_ids and token_ids.
  bool return_token_ids = false;
  // Each choice carries prompt_logprobs with this many alternatives per
  // token: the request's prompt_logprobs, else logprobs when echo scores the
  // prompt (as vLLM). request.params.prompt_logprobs may be larger (echo's
  // logprobs), so the engine computes both.
  std::optional<int32_t> prompt_logprobs;
};

// Request bounds of /v1/completions (docs/api.md).
inline constexpr size_t kMaxPromptsPerRequest = 256;
inline constexpr int64_t kMaxSequencesPerRequest = 1024;  // prompts × (best_of, else n)

// `prompt`: a string, a list of strings, a list of token ids, or a list of
// token-id lists. Also reads echo, logprobs (0..20; with echo the prompt is
// scored too), prompt_logprobs (0..20; not with stream), return_token_ids,
// truncate_prompt_tokens / truncation_side (prompt_truncation.h; -1 keeps
// max_model_len - max_tokens), add_special_tokens (default true) and rejects
// a non-empty suffix. Tokenizes on the calling (worker) thread. max_tokens
// defaults to 16, as OpenAI's; 0 needs echo. Refuses (400) more than
// kMaxPromptsPerRequest prompts or kMaxSequencesPerRequest sequences, a prompt
// text with more bytes than the context could hold (before tokenizing it;
// unless truncated), and a non-streamed request whose response could exceed
// ctx.options.max_response_bytes (response_bound.h). A truncated prompt's
// echo is the text of the tokens kept. A structured-output constraint
// (structured_output_request.h) is compiled last, once the request is known
// to fit, into request.constraint.
ApiResult<CompletionPlan> plan_completion(const ServiceContext& ctx, const Json& body);

}  // namespace pagoda::openai
