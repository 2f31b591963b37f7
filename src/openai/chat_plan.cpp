#include "openai/chat_plan.h"

#include "openai/field_reader.h"
#include "openai/response_bound.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

ApiResult<ChatPlan> plan_chat(const ServiceContext& ctx, const Json& body) {
  const int64_t vocab_size = ctx.engine.tokenizer().vocab_size();
  ChatPlan plan;
  FieldReader reader(body);
  plan.fields = read_sampling_fields(reader, vocab_size);
  const bool logprobs = reader.boolean("logprobs").value_or(false);
  const auto top_logprobs = reader.integer("top_logprobs", 0, kMaxLogprobs);
  if (top_logprobs && !logprobs && !reader.error()) {
    reader.fail_field("top_logprobs", "requires 'logprobs': true");
  }
  plan.fields.logprobs = logprobs ? static_cast<int>(top_logprobs.value_or(0)) : -1;
  reader.boolean("parallel_tool_calls");
  if (reader.error()) return *reader.error();

  auto prompt = build_chat_prompt(ctx, body);
  if (!prompt.ok()) return prompt.error();
  plan.prompt = std::move(prompt.value());
  plan.parse_tool_calls =
      plan.prompt.tools.mode != ToolChoiceMode::kNone && ctx.tool_parser != nullptr;
  if (plan.parse_tool_calls && !reader.value("skip_special_tokens"))
    plan.fields.skip_special_tokens = false;

  if (plan.fields.max_tokens == 0) {
    return invalid_field("max_tokens", "'max_tokens' / 'max_completion_tokens' must be at least 1");
  }
  auto max_tokens =
      fit_context(static_cast<int64_t>(plan.prompt.token_ids.size()), plan.fields.max_tokens, -1,
                  ctx.engine.info().max_model_len, "messages");
  if (!max_tokens.ok()) return max_tokens.error();
  auto params = to_sampling_params(plan.fields, max_tokens.value(), vocab_size);
  if (!params.ok()) return params.error();
  plan.params = std::move(params.value());
  if (!plan.fields.stream) {
    ResponseShape shape;
    shape.chat = true;
    shape.num_choices = plan.fields.n;
    shape.max_tokens = max_tokens.value();
    shape.logprobs = plan.fields.logprobs;
    if (auto error = check_response_size(shape, ctx.max_token_bytes, ctx.options.max_response_bytes))
      return *error;
  }
  return plan;
}

}  // namespace pagoda::openai
