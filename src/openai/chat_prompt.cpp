#include "openai/chat_prompt.h"

#include <fmt/format.h>

#include <algorithm>

#include "openai/field_reader.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

namespace {

// continue_final_message and add_generation_prompt, as vLLM resolves them:
// continuing needs a final assistant message and no generation prompt (an
// add_generation_prompt left out reads as false then).
std::optional<ApiError> read_generation_prompt(FieldReader& reader, const Json& messages,
                                               ChatTemplateInputs& inputs) {
  inputs.continue_final_message = reader.boolean("continue_final_message").value_or(false);
  const std::optional<bool> add_generation_prompt = reader.boolean("add_generation_prompt");
  inputs.add_generation_prompt = add_generation_prompt.value_or(!inputs.continue_final_message);
  if (reader.error() || !inputs.continue_final_message) return std::nullopt;
  if (inputs.add_generation_prompt) {
    return invalid_field("continue_final_message",
                         "Cannot set both 'continue_final_message' and 'add_generation_prompt' to "
                         "true: set 'add_generation_prompt': false to continue the final message");
  }
  if (messages.back().value("role", "") != "assistant") {
    return invalid_field("continue_final_message",
                         "'continue_final_message' needs a final assistant message to continue; "
                         "the last message's role is '" +
                             messages.back().value("role", "") + "'");
  }
  return std::nullopt;
}

}  // namespace

ApiResult<ChatPrompt> build_chat_prompt(const ServiceContext& ctx, const Json& body, bool bounded) {
  FieldReader reader(body);
  const Json* messages = reader.value("messages");
  if (!messages) return invalid_field("messages", "'messages' is required");
  auto normalized = normalize_messages(*messages);
  if (!normalized.ok()) return normalized.error();
  auto tools = select_tools(reader.value("tools"), reader.value("tool_choice"));
  if (!tools.ok()) return tools.error();
  ChatTemplateInputs inputs;
  if (auto error = read_generation_prompt(reader, normalized.value(), inputs)) return *error;
  const std::optional<bool> add_special_tokens = reader.boolean("add_special_tokens");
  const Json* kwargs = reader.value("chat_template_kwargs");
  if (kwargs && !kwargs->is_object())
    reader.fail_field("chat_template_kwargs", "must be an object");
  const Json* documents = reader.value("documents");
  if (documents && !(documents->is_array() &&
                     std::all_of(documents->begin(), documents->end(),
                                 [](const Json& d) { return d.is_object(); }))) {
    reader.fail_field("documents", "must be an array of objects (e.g. {\"title\", \"text\"})");
  }
  if (reader.error()) return *reader.error();

  if (!ctx.engine.has_chat_template()) {
    return invalid_field(
        "messages",
        "this model has no chat template: start the server with --chat-template FILE "
        "or use /v1/completions");
  }
  const Tokenizer& tokenizer = ctx.engine.tokenizer();
  inputs.messages = std::move(normalized.value());
  inputs.tools = tools.value().tools;
  inputs.bos_token = tokenizer.bos_token();
  inputs.eos_token = tokenizer.eos_token();
  if (kwargs) inputs.extra = *kwargs;
  if (documents) inputs.documents = *documents;
  auto rendered = ctx.engine.apply_chat_template(inputs);
  if (!rendered.ok()) {
    return invalid_field("messages",
                         fmt::format("chat template failed: {}", rendered.error().message));
  }
  const int64_t max_prompt_bytes = ctx.max_prompt_bytes();
  if (bounded && static_cast<int64_t>(rendered->size()) > max_prompt_bytes) {
    return ApiError{400,
                    fmt::format("The rendered messages have {} bytes, more than the context could hold "
                                "({} bytes: 4 x the context length x the longest token). Please reduce "
                                "the length of the messages.",
                                rendered->size(), max_prompt_bytes),
                    "messages", "context_length_exceeded"};
  }
  ChatPrompt prompt;
  prompt.text = std::move(rendered.value());
  prompt.token_ids = add_special_tokens ? tokenizer.encode(prompt.text, *add_special_tokens,
                                                           /*parse_special=*/true)
                                        : tokenizer.encode_prompt(prompt.text);
  prompt.tools = std::move(tools.value());
  return prompt;
}

bool chat_template_ignores_tools(const Engine& engine) {
  if (!engine.has_chat_template()) return false;
  const Tokenizer& tokenizer = engine.tokenizer();
  ChatTemplateInputs inputs;
  inputs.messages = Json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}});
  inputs.add_generation_prompt = true;
  inputs.bos_token = tokenizer.bos_token();
  inputs.eos_token = tokenizer.eos_token();
  auto without = engine.apply_chat_template(inputs);
  inputs.tools = Json::parse(R"([{"type": "function", "function": {
      "name": "get_current_weather", "description": "Get the current weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}}])");
  auto with = engine.apply_chat_template(inputs);
  return without.ok() && with.ok() && without.value() == with.value();
}

}  // namespace pagoda::openai
