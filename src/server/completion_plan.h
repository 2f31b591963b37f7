// /v1/completions request → what to generate: tokenized prompts, resolved
// SamplingParams and the response options (echo, logprobs, stream).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/sampling_request.h"
#include "server/service_context.h"

namespace pagoda::server {

struct CompletionPlan {
  std::vector<std::vector<int32_t>> prompts;  // one engine request each
  std::vector<std::string> prompt_texts;      // per prompt: the text echo prepends
  SamplingFields fields;
  SamplingParams params;
  bool echo = false;
};

// `prompt`: a string, a list of strings, a list of token ids, or a list of
// token-id lists. Also reads echo, logprobs (0..20; with echo the prompt is
// scored too), add_special_tokens (default true) and rejects a non-empty suffix. Tokenizes
// on the calling (worker) thread. max_tokens defaults to 16, as OpenAI's.
ApiResult<CompletionPlan> plan_completion(const ServiceContext& ctx, const Json& body);

}  // namespace pagoda::server
