#include "server/completion_plan.h"

#include <fmt/format.h>

#include "server/field_reader.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {

namespace {

constexpr int64_t kDefaultMaxTokens = 16;
constexpr size_t kMaxChoices = 4096;  // prompts × n

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

// Fills plan.prompts and plan.prompt_texts from `prompt`.
std::optional<ApiError> read_prompts(const Json& prompt, const Tokenizer& tokenizer,
                                     bool add_special, CompletionPlan& plan) {
  const int64_t vocab_size = tokenizer.vocab_size();
  auto add_text = [&](const std::string& text) {
    plan.prompts.push_back(tokenizer.encode(text, add_special, /*parse_special=*/true));
    plan.prompt_texts.push_back(text);
  };
  auto add_ids = [&](const Json& ids, size_t index) -> std::optional<ApiError> {
    auto tokens = read_token_prompt(ids, vocab_size, index);
    if (!tokens.ok()) return tokens.error();
    plan.prompt_texts.push_back(tokenizer.decode(tokens.value(), false));
    plan.prompts.push_back(std::move(tokens.value()));
    return std::nullopt;
  };
  if (prompt.is_string()) {
    add_text(prompt.get<std::string>());
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
        add_text(prompt[i].get<std::string>());
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
  plan.fields = read_sampling_fields(reader, tokenizer.vocab_size());
  plan.echo = reader.boolean("echo").value_or(false);
  plan.fields.logprobs = static_cast<int>(reader.integer("logprobs", 0, kMaxLogprobs).value_or(-1));
  const bool add_special = reader.boolean("add_special_tokens").value_or(true);
  if (auto suffix = reader.string("suffix"); suffix && !suffix->empty()) {
    reader.fail_field("suffix", "is not supported");
  }
  const Json* prompt = reader.value("prompt");
  if (!prompt && !reader.error()) reader.fail(invalid_field("prompt", "'prompt' is required"));
  if (reader.error()) return *reader.error();

  if (auto error = read_prompts(*prompt, tokenizer, add_special, plan)) return *error;
  if (plan.prompts.size() * plan.fields.n > kMaxChoices) {
    return invalid_field("n", fmt::format("prompts × n = {} exceeds the limit of {} choices",
                                          plan.prompts.size() * plan.fields.n, kMaxChoices));
  }
  if (plan.echo && plan.fields.logprobs >= 0) plan.fields.prompt_logprobs = plan.fields.logprobs;
  if (plan.fields.max_tokens == 0 && !plan.echo) {
    return invalid_field("max_tokens",
                         "'max_tokens' must be at least 1 (0 is allowed only with echo)");
  }
  int64_t max_tokens = INT64_MAX;
  for (const auto& ids : plan.prompts) {
    auto fitted = fit_context(static_cast<int64_t>(ids.size()), plan.fields.max_tokens,
                              kDefaultMaxTokens, info.max_model_len, "prompt");
    if (!fitted.ok()) return fitted.error();
    max_tokens = std::min(max_tokens, fitted.value());
  }
  auto params = to_sampling_params(plan.fields, max_tokens, tokenizer.vocab_size());
  if (!params.ok()) return params.error();
  plan.params = std::move(params.value());
  return plan;
}

}  // namespace pagoda::server
