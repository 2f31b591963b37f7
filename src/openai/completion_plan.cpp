#include "openai/completion_plan.h"

#include <fmt/format.h>

#include "openai/bad_words.h"
#include "openai/field_reader.h"
#include "openai/prompt_truncation.h"
#include "openai/response_bound.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

namespace {

constexpr int64_t kDefaultMaxTokens = 16;

ApiError prompt_error(const std::string& what) {
  return invalid_field("prompt", "'prompt' " + what);
}

ApiResult<std::vector<int32_t>> read_token_prompt(const Json& ids, int64_t vocab_size,
                                                  size_t index) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto id = as_integer(ids[i], 0, vocab_size - 1);
    if (!id) {
      return prompt_error(fmt::format("[{}][{}] must be a token id in [0, {}), got {}", index, i,
                                      vocab_size, describe_value(ids[i])));
    }
    out.push_back(static_cast<int32_t>(*id));
  }
  return out;
}

// Fills plan.prompts and plan.prompt_texts from `prompt`. A text longer than
// `max_prompt_bytes` cannot fit the context and is refused before tokenizing.
std::optional<ApiError> read_prompts(const Json& prompt, const Tokenizer& tokenizer,
                                     bool add_special, int64_t max_prompt_bytes,
                                     CompletionPlan& plan) {
  const int64_t vocab_size = tokenizer.vocab_size();
  auto add_text = [&](const std::string& text) -> std::optional<ApiError> {
    if (static_cast<int64_t>(text.size()) > max_prompt_bytes) {
      return ApiError{400,
                      fmt::format("'prompt'[{}] has {} bytes, more than the context could hold "
                                  "({} bytes: 4 x the context length x the longest token). "
                                  "Please reduce the length of the prompt.",
                                  plan.prompts.size(), text.size(), max_prompt_bytes),
                      "prompt", "context_length_exceeded"};
    }
    plan.prompts.push_back(tokenizer.encode(text, add_special, /*parse_special=*/true));
    plan.prompt_texts.push_back(text);
    return std::nullopt;
  };
  auto add_ids = [&](const Json& ids, size_t index) -> std::optional<ApiError> {
    auto tokens = read_token_prompt(ids, vocab_size, index);
    if (!tokens.ok()) return tokens.error();
    plan.prompt_texts.push_back(tokenizer.decode(tokens.value(), false));
    plan.prompts.push_back(std::move(tokens.value()));
    return std::nullopt;
  };
  if (prompt.is_array() && !prompt.empty() && !prompt[0].is_number() &&
      prompt.size() > kMaxPromptsPerRequest) {
    return prompt_error(fmt::format("holds {} prompts; at most {} are allowed per request",
                                    prompt.size(), kMaxPromptsPerRequest));
  }
  if (prompt.is_string()) {
    if (auto error = add_text(prompt.get<std::string>())) return error;
  } else if (!prompt.is_array() || prompt.empty()) {
    return prompt_error(
        fmt::format("must be a string, a list of strings, a list of token ids or a list of "
                    "token-id lists, got {}",
                    describe_value(prompt)));
  } else if (prompt[0].is_number()) {
    if (auto error = add_ids(prompt, 0)) return error;
  } else {
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (prompt[i].is_string()) {
        if (auto error = add_text(prompt[i].get<std::string>())) return error;
      } else if (prompt[i].is_array()) {
        if (auto error = add_ids(prompt[i], i)) return error;
      } else {
        return prompt_error(fmt::format("[{}] must be a string or a list of token ids, got {}", i,
                                        describe_value(prompt[i])));
      }
    }
  }
  for (size_t i = 0; i < plan.prompts.size(); ++i) {
    if (plan.prompts[i].empty()) return prompt_error(fmt::format("[{}] is empty", i));
  }
  return std::nullopt;
}

}  // namespace

ApiResult<CompletionPlan> plan_completion(const ServiceContext& ctx, const Json& body) {
  const Tokenizer& tokenizer = ctx.engine.tokenizer();
  const ModelInfo& info = ctx.engine.info();
  CompletionPlan plan;
  FieldReader reader(body);
  plan.request = read_sampling_request(reader, tokenizer.vocab_size());
  SamplingParams& params = plan.request.params;
  plan.echo = reader.boolean("echo").value_or(false);
  params.logprobs = read_logprob_count(reader, "logprobs");
  plan.prompt_logprobs = read_prompt_logprobs(reader, plan.request.stream);
  plan.return_token_ids = reader.boolean("return_token_ids").value_or(false);
  const PromptTruncation truncation = read_prompt_truncation(reader);
  read_bad_words(reader, tokenizer, params);
  const bool add_special = reader.boolean("add_special_tokens").value_or(true);
  if (auto suffix = reader.string("suffix"); suffix && !suffix->empty()) {
    reader.fail_field("suffix", "is not supported");
  }
  const Json* prompt = reader.value("prompt");
  if (!prompt && !reader.error()) reader.fail(invalid_field("prompt", "'prompt' is required"));
  if (reader.error()) return *reader.error();

  // A prompt to be truncated may be longer than the context.
  const int64_t max_prompt_bytes = truncation.active() ? INT64_MAX : ctx.max_prompt_bytes();
  if (auto error = read_prompts(*prompt, tokenizer, add_special, max_prompt_bytes, plan)) return *error;
  const int64_t num_prompts = static_cast<int64_t>(plan.prompts.size());
  if (truncation.active()) {
    const bool max_tokens_sent = plan.request.max_tokens.has_value();
    auto keep = truncation_length(
        truncation, info.max_model_len, plan.request.max_tokens.value_or(kDefaultMaxTokens),
        max_tokens_sent && body.contains("max_completion_tokens") ? "max_completion_tokens"
                                                                  : "max_tokens");
    if (!keep.ok()) return keep.error();
    for (size_t i = 0; i < plan.prompts.size(); ++i) {
      if (truncate_prompt(truncation, keep.value(), plan.prompts[i]))
        plan.prompt_texts[i] = tokenizer.decode(plan.prompts[i], false);
    }
  }
  if (plan.echo && params.logprobs && !plan.prompt_logprobs) plan.prompt_logprobs = params.logprobs;
  params.prompt_logprobs = plan.prompt_logprobs;
  if (plan.echo && params.logprobs)
    params.prompt_logprobs = std::max(*params.logprobs, params.prompt_logprobs.value_or(0));
  if (plan.request.max_tokens == 0 && !plan.echo) {
    return invalid_field("max_tokens",
                         "'max_tokens' must be at least 1 (0 is allowed only with echo)");
  }
  // max_tokens 0 with echo: the engine scores the prompt and samples one
  // token, which the answer leaves out.
  plan.echo_only = plan.request.max_tokens == 0;
  const std::optional<int64_t> requested =
      plan.echo_only ? std::optional<int64_t>(1) : plan.request.max_tokens;
  int64_t max_tokens = INT64_MAX;
  for (const auto& ids : plan.prompts) {
    auto fitted = fit_context(info, {.num_prompt_tokens = static_cast<int64_t>(ids.size()),
                                     .max_tokens = requested,
                                     .default_max_tokens = kDefaultMaxTokens});
    if (!fitted.ok()) return request_limit_error(fitted.error(), "prompt");
    max_tokens = std::min(max_tokens, fitted.value());
  }
  params.max_tokens = static_cast<int32_t>(max_tokens);
  if (auto error = sampling_params_error(params, tokenizer.vocab_size())) return *error;
  const int64_t num_seqs = num_prompts * params.num_seqs();
  if (num_seqs > kMaxSequencesPerRequest) {
    return invalid_field(
        "n", fmt::format("prompts x n (or best_of) = {} sequences; at most {} are allowed per request",
                         num_seqs, kMaxSequencesPerRequest));
  }
  if (!plan.request.stream) {
    ResponseShape shape;
    shape.num_choices = num_prompts * params.n;
    shape.max_tokens = plan.echo_only ? 0 : max_tokens;
    shape.logprobs = params.logprobs.value_or(-1);
    shape.prompt_logprobs = plan.prompt_logprobs.value_or(-1);
    shape.token_ids = plan.return_token_ids;
    for (const auto& ids : plan.prompts)
      shape.prompt_tokens += params.n * static_cast<int64_t>(ids.size());
    if (plan.echo) {
      for (size_t i = 0; i < plan.prompts.size(); ++i) {
        shape.echo_bytes += params.n * static_cast<int64_t>(plan.prompt_texts[i].size());
        shape.echo_tokens += params.n * static_cast<int64_t>(plan.prompts[i].size());
      }
    }
    if (auto error = check_response_size(shape, ctx.max_token_bytes, ctx.options.max_response_bytes))
      return *error;
  }
  // The seats and the KV pool, as add_request checks each prompt.
  for (const auto& ids : plan.prompts) {
    auto fits = fit_request(info, {.num_prompt_tokens = static_cast<int64_t>(ids.size()),
                                   .max_tokens = max_tokens,
                                   .num_seqs = params.num_seqs()});
    if (!fits.ok()) return request_limit_error(fits.error(), "prompt");
  }
  if (plan.request.constraint_source) {
    auto constraint = compile_constraint_source(ctx.engine, *plan.request.constraint_source);
    if (!constraint.ok()) return constraint.error();
    plan.request.constraint = std::move(constraint.value());
  }
  return plan;
}

}  // namespace pagoda::openai
