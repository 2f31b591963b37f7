// /v1/chat/completions request → what to generate: the rendered, tokenized
// prompt, the sampling request (resolved SamplingParams, logprobs) and
// tool-call options.
#pragma once

#include "openai/api_error.h"
#include "openai/chat_prompt.h"
#include "openai/sampling_request.h"
#include "openai/service_context.h"
#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

struct ChatPlan {
  ChatPrompt prompt;
  // request.params.logprobs: top_logprobs (default 0) when logprobs is true, else unset.
  SamplingRequest request;
  // Tools offered and either the server has a parser or tool_choice forces
  // the calls.
  bool parse_tool_calls = false;
  // tool_choice "required" or a named function: the output is constrained to
  // the call(s) (tool_constraint.h; request.constraint) and read back by this
  // parser (tools/forced_tool_calls.h) instead of the server's; null otherwise.
  std::shared_ptr<const ToolParser> forced_tool_parser;
  // return_token_ids: the response carries prompt_token_ids, each choice
  // token_ids (in a stream: the first chunk and each chunk's new tokens).
  bool return_token_ids = false;
  // prompt_logprobs (= request.params.prompt_logprobs): the response carries
  // them with this many alternatives per token.
  std::optional<int32_t> prompt_logprobs;
  // parallel_tool_calls (default true); false keeps only the first tool call
  // of each choice, as vLLM does.
  bool parallel_tool_calls = true;
  // Non-empty: the chat template ignores the tools offered; sent as the
  // X-Pagoda-Warning header (ServiceOptions::strict_tools makes it a 400).
  std::string tools_warning;
  // With a reasoning parser (ServiceContext::reasoning_parser): where the
  // rendered prompt leaves the reasoning, and include_reasoning (vLLM's field,
  // default true; false drops the reasoning text from the answer).
  PromptThinkState prompt_think = PromptThinkState::kNone;
  bool include_reasoning = true;
};

// Reads the sampling request, logprobs (bool) and top_logprobs (0..20, needs
// logprobs), prompt_logprobs (0..20, not with stream), return_token_ids and
// truncate_prompt_tokens / truncation_side (prompt_truncation.h: of the
// rendered prompt's tokens; -1 keeps max_model_len - max_completion_tokens or
// max_tokens, else the whole context), renders and tokenizes the messages,
// and sizes max_tokens (max_completion_tokens or max_tokens, default: the
// rest of the context).
// With tool parsing on, special tokens stay in the text unless the client sets
// skip_special_tokens (tool-call tags can be special tokens). Tools with
// tool_choice "auto" (their default) are a 400 naming tool_choice when the
// server runs with --no-enable-auto-tool-choice; tools the chat template
// ignores are a 400 naming tools under --strict-tools, else a warning.
// tool_choice "required" or a named function constrains the output
// (tool_constraint.h; with another constraint source it is a 400 naming
// both). The constraint is compiled last, once the request is known to fit.
// include_reasoning (bool) is read with or without a reasoning parser.
ApiResult<ChatPlan> plan_chat(const ServiceContext& ctx, const Json& body);

}  // namespace pagoda::openai
