#include "openai/chat_plan.h"

#include <fmt/format.h>

#include "openai/bad_words.h"
#include "openai/field_reader.h"
#include "openai/prompt_truncation.h"
#include "openai/response_bound.h"
#include "openai/reasoning/reasoning_constraint.h"
#include "openai/tool_constraint.h"
#include "openai/tools/forced_tool_calls.h"
#include "openai/unsupported_fields.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

ApiResult<ChatPlan> plan_chat(const ServiceContext& ctx, const Json& body) {
  const int64_t vocab_size = ctx.engine.tokenizer().vocab_size();
  const ModelInfo& info = ctx.engine.info();
  ChatPlan plan;
  FieldReader reader(body);
  plan.request = read_sampling_request(reader, vocab_size);
  SamplingParams& params = plan.request.params;
  const bool logprobs = reader.boolean("logprobs").value_or(false);
  const auto top_logprobs = read_logprob_count(reader, "top_logprobs");
  if (top_logprobs && !logprobs && !reader.error()) {
    reader.fail_field("top_logprobs", "requires 'logprobs': true");
  }
  if (logprobs) params.logprobs = top_logprobs.value_or(0);
  plan.prompt_logprobs = read_prompt_logprobs(reader, plan.request.stream);
  params.prompt_logprobs = plan.prompt_logprobs;
  plan.return_token_ids = reader.boolean("return_token_ids").value_or(false);
  const PromptTruncation truncation = read_prompt_truncation(reader);
  plan.parallel_tool_calls = reader.boolean("parallel_tool_calls").value_or(true);
  plan.include_reasoning = reader.boolean("include_reasoning").value_or(true);
  refuse_unsupported_chat_fields(reader);
  read_bad_words(reader, ctx.engine.tokenizer(), params);
  if (reader.error()) return *reader.error();

  auto prompt = build_chat_prompt(ctx, body, /*bounded=*/!truncation.active());
  if (!prompt.ok()) return prompt.error();
  plan.prompt = std::move(prompt.value());
  if (ctx.reasoning_parser) plan.prompt_think = prompt_think_state(plan.prompt.text);
  if (truncation.active()) {
    auto keep = truncation_length(
        truncation, info.max_model_len, plan.request.max_tokens.value_or(0),
        body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens");
    if (!keep.ok()) return keep.error();
    truncate_prompt(truncation, keep.value(), plan.prompt.token_ids);
  }
  const ToolChoiceMode tool_mode = plan.prompt.tools.mode;
  if (tool_mode == ToolChoiceMode::kAuto && !ctx.options.auto_tool_choice) {
    return invalid_field("tool_choice",
                         "\"auto\" tool choice (the default when 'tools' are given) requires "
                         "--enable-auto-tool-choice, and this server runs with "
                         "--no-enable-auto-tool-choice; send tool_choice \"none\", \"required\" "
                         "or a named function");
  }
  if (tool_mode != ToolChoiceMode::kNone && ctx.template_ignores_tools) {
    if (ctx.options.strict_tools) {
      return invalid_field(
          "tools", fmt::format("the chat template of model '{}' ignores 'tools' (it renders the "
                               "same prompt with and without them), so the model would never see "
                               "them; start the server with --chat-template FILE naming a template "
                               "that renders tools",
                               ctx.model_name));
    }
    plan.tools_warning =
        "the chat template ignores 'tools': the model did not see them (start the server with "
        "--chat-template FILE naming a template that renders tools)";
  }
  auto tool_constraint = tool_choice_constraint(plan.prompt.tools, plan.parallel_tool_calls);
  if (!tool_constraint.ok()) return tool_constraint.error();
  if (tool_constraint.value()) {
    if (plan.request.constraint_source)
      return conflicting_constraints(plan.request.constraint_source->field, "tool_choice");
    if (auto error = constraint_fit_error(params, "tool_choice")) return *error;
    plan.request.constraint_source = std::move(*tool_constraint.value());
    plan.forced_tool_parser =
        tool_mode == ToolChoiceMode::kRequired
            ? make_required_tool_call_parser()
            : make_named_tool_call_parser(
                  plan.prompt.tools.tools.at(0)["function"]["name"].get<std::string>());
  }
  plan.parse_tool_calls = tool_mode != ToolChoiceMode::kNone &&
                          (plan.forced_tool_parser != nullptr || ctx.tool_parser != nullptr);
  if (plan.parse_tool_calls && !reader.value("skip_special_tokens"))
    params.skip_special_tokens = false;

  if (plan.request.max_tokens == 0) {
    return invalid_field("max_tokens", "'max_tokens' / 'max_completion_tokens' must be at least 1");
  }
  RequestSize size{.num_prompt_tokens = static_cast<int64_t>(plan.prompt.token_ids.size()),
                   .max_tokens = plan.request.max_tokens,
                   .prompt_name = "messages"};
  auto max_tokens = fit_context(info, size);
  if (!max_tokens.ok()) return request_limit_error(max_tokens.error(), "messages");
  params.max_tokens = static_cast<int32_t>(max_tokens.value());
  if (auto error = sampling_params_error(params, vocab_size)) return *error;
  if (!plan.request.stream) {
    ResponseShape shape;
    shape.chat = true;
    shape.num_choices = params.n;
    shape.max_tokens = max_tokens.value();
    shape.logprobs = params.logprobs.value_or(-1);
    shape.prompt_logprobs = plan.prompt_logprobs.value_or(-1);
    shape.token_ids = plan.return_token_ids;
    shape.reasoning = ctx.reasoning_parser != nullptr && plan.include_reasoning;
    shape.prompt_tokens = static_cast<int64_t>(plan.prompt.token_ids.size());
    if (auto error = check_response_size(shape, ctx.max_token_bytes, ctx.options.max_response_bytes))
      return *error;
  }
  // The seats and the KV pool, as add_request checks them.
  size.max_tokens = max_tokens.value();
  size.num_seqs = params.num_seqs();
  if (auto fits = fit_request(info, size); !fits.ok())
    return request_limit_error(fits.error(), "messages");
  if (plan.request.constraint_source) {
    auto constraint = compile_constraint_source(ctx.engine, *plan.request.constraint_source);
    if (!constraint.ok()) return constraint.error();
    plan.request.constraint = std::move(constraint.value());
    // A reasoning model's constraint applies to its answer, after </think>.
    if (ctx.reasoning_parser) {
      plan.request.constraint = gate_after_reasoning(std::move(plan.request.constraint), *ctx.reasoning_parser,
                                                     ctx.engine.tokenizer(), plan.prompt.token_ids,
                                                     ctx.engine.info().vocab_size);
    }
  }
  return plan;
}

}  // namespace pagoda::openai
