// A chat request's prompt: messages (and tools) rendered through the chat
// template, then tokenized. Shared by /v1/chat/completions and /tokenize.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "openai/api_error.h"
#include "openai/chat_messages.h"
#include "openai/service_context.h"

namespace pagoda::openai {

struct ChatPrompt {
  std::string text;                // the rendered template
  std::vector<int32_t> token_ids;  // its tokens
  ToolSelection tools;
};

// Reads messages, tools, tool_choice, add_generation_prompt (default true,
// but false with continue_final_message), continue_final_message (default
// false: the final message, which must be the assistant's, is left open for
// the model to continue; 400 with add_generation_prompt true, as vLLM),
// chat_template_kwargs (object) and add_special_tokens from `body`, renders
// and tokenizes: with add_special_tokens as given, else with the tokenizer's
// BOS unless the rendered text already starts with it (Tokenizer::encode_prompt). 400 when the
// model has no chat template or rendering fails, and when the rendered text
// has more bytes than the context could hold, unless `bounded` is false (the
// caller truncates the tokens). Runs on a worker thread.
ApiResult<ChatPrompt> build_chat_prompt(const ServiceContext& ctx, const Json& body,
                                        bool bounded = true);

// Whether the engine's chat template ignores tools: a probe conversation (one
// user message, with and without one example tool) renders to the same text.
// False when there is no template or either rendering fails.
bool chat_template_ignores_tools(const Engine& engine);

}  // namespace pagoda::openai
