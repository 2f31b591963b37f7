#include "openai/sampling_request.h"

#include <fmt/format.h>

#include <climits>

namespace pagoda::openai {

namespace {

constexpr size_t kMaxStopStrings = 64;

// `key` as a token id when it is one in canonical decimal form (digits only:
// no sign, space or leading zero, "0" itself excepted) below `vocab_size`; else -1.
int64_t canonical_token_id(const std::string& key, int64_t vocab_size) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return -1;
  int64_t id = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return -1;
    id = id * 10 + (c - '0');
  }
  return id < vocab_size ? id : -1;
}

std::map<int32_t, float> read_logit_bias(FieldReader& reader, int64_t vocab_size) {
  std::map<int32_t, float> bias;
  const Json* value = reader.value("logit_bias");
  if (!value) return bias;
  if (!value->is_object()) {
    reader.fail_field("logit_bias",
                      fmt::format("must be an object mapping token ids to numbers, got {}",
                                  describe_value(*value)));
    return bias;
  }
  for (const auto& [key, v] : value->items()) {
    const int64_t id = canonical_token_id(key, vocab_size);
    if (id < 0) {
      reader.fail_field(
          "logit_bias",
          fmt::format("has key '{}', which is not a token id in [0, {}) written in canonical "
                      "decimal (digits only: no sign, space or leading zero)",
                      key, vocab_size));
      return bias;
    }
    if (!v.is_number() || v.get<double>() < -100.0 || v.get<double>() > 100.0) {
      reader.fail_field("logit_bias", fmt::format("['{}'] must be a number in [-100, 100], got {}",
                                                  key, describe_value(v)));
      return bias;
    }
    bias[static_cast<int32_t>(id)] = v.get<float>();
  }
  return bias;
}

void read_stop(FieldReader& reader, SamplingFields& f) {
  f.stop = reader.string_list("stop").value_or(std::vector<std::string>{});
  if (f.stop.size() > kMaxStopStrings) {
    reader.fail_field("stop", fmt::format("holds {} strings; at most {} are allowed", f.stop.size(),
                                          kMaxStopStrings));
  }
  for (const auto& s : f.stop) {
    if (s.empty()) reader.fail_field("stop", "must not contain empty strings");
  }
}

void read_stream_fields(FieldReader& reader, SamplingFields& f) {
  f.stream = reader.boolean("stream").value_or(false);
  const Json* options = reader.value("stream_options");
  if (!options) return;
  if (!options->is_object()) {
    reader.fail_field("stream_options",
                      fmt::format("must be an object, got {}", describe_value(*options)));
    return;
  }
  if (!f.stream) {
    reader.fail_field("stream_options", "is only allowed when 'stream' is true");
    return;
  }
  FieldReader nested(*options, "stream_options.");
  f.include_usage = nested.boolean("include_usage").value_or(false);
  nested.boolean("continuous_usage_stats");
  if (nested.error()) reader.fail(*nested.error());
}

void read_early_stopping(FieldReader& reader, SamplingFields& f) {
  const Json* value = reader.value("early_stopping");
  if (!value) return;
  if (value->is_boolean()) {
    f.early_stopping = value->get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kFalse;
  } else if (value->is_string() && *value == "never") {
    f.early_stopping = EarlyStopping::kNever;
  } else {
    reader.fail_field("early_stopping", fmt::format("must be true, false or \"never\", got {}",
                                                    describe_value(*value)));
  }
}

}  // namespace

SamplingFields read_sampling_fields(FieldReader& reader, int64_t vocab_size) {
  SamplingFields f;
  f.n = static_cast<int>(reader.integer("n", 1, kMaxNumSamples).value_or(1));
  f.best_of = reader.integer("best_of", 1, kMaxNumSamples);
  if (f.best_of && *f.best_of < f.n) {
    reader.fail_field("best_of", fmt::format("({}) must be at least n ({})", *f.best_of, f.n));
  }
  f.temperature = reader.number("temperature", 0.0, 2.0);
  f.top_p = reader.number("top_p", 0.0, 1.0, /*lo_open=*/true);
  f.top_k = reader.integer("top_k", -1, INT32_MAX);
  f.min_p = reader.number("min_p", 0.0, 1.0);
  if (auto seed = reader.integer("seed", INT64_MIN, INT64_MAX))
    f.seed = static_cast<uint64_t>(*seed);
  f.presence_penalty = reader.number("presence_penalty", -2.0, 2.0);
  f.frequency_penalty = reader.number("frequency_penalty", -2.0, 2.0);
  f.repetition_penalty = reader.number("repetition_penalty", 0.0, 100.0, /*lo_open=*/true);
  f.logit_bias = read_logit_bias(reader, vocab_size);
  read_stop(reader, f);
  if (auto ids = reader.integer_list("stop_token_ids", 0, vocab_size - 1)) {
    f.stop_token_ids.assign(ids->begin(), ids->end());
  }
  f.ignore_eos = reader.boolean("ignore_eos").value_or(false);
  f.min_tokens = reader.integer("min_tokens", 0, INT32_MAX).value_or(0);
  f.skip_special_tokens = reader.boolean("skip_special_tokens").value_or(true);
  f.include_stop_str_in_output = reader.boolean("include_stop_str_in_output").value_or(false);
  const auto max_tokens = reader.integer("max_tokens", 0, INT32_MAX);
  const auto max_completion_tokens = reader.integer("max_completion_tokens", 0, INT32_MAX);
  f.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  if (f.max_tokens && f.min_tokens > *f.max_tokens) {
    reader.fail_field("min_tokens", fmt::format("({}) must not exceed max_tokens ({})",
                                                f.min_tokens, *f.max_tokens));
  }
  f.use_beam_search = reader.boolean("use_beam_search").value_or(false);
  f.length_penalty = reader.number("length_penalty", -1e6, 1e6);
  read_early_stopping(reader, f);
  if (f.use_beam_search && f.best_of.value_or(f.n) > kMaxBeamWidth) {
    reader.fail_field("best_of", fmt::format("(the beam width) must be at most {}", kMaxBeamWidth));
  }
  f.priority = static_cast<int>(reader.integer("priority", INT32_MIN, INT32_MAX).value_or(0));
  reader.string("user");
  read_stream_fields(reader, f);
  if (f.stream && (f.use_beam_search || f.best_of.value_or(f.n) > f.n)) {
    reader.fail_field("stream", "cannot be used with best_of > n or use_beam_search");
  }
  if (const Json* format = reader.value("response_format")) {
    if (!format->is_object() || !format->contains("type") || (*format)["type"] != "text") {
      reader.fail_field("response_format", "only {\"type\": \"text\"} is supported");
    }
  }
  return f;
}

ApiResult<int64_t> fit_context(int64_t num_prompt_tokens, std::optional<int64_t> requested,
                               int64_t default_max, int64_t max_model_len,
                               const char* prompt_param) {
  const int64_t left = max_model_len - num_prompt_tokens;
  if (left <= 0 || (requested && *requested > left)) {
    const int64_t completion = requested.value_or(0);
    return ApiError{
        400,
        fmt::format(
            "This model's maximum context length is {} tokens. However, you requested {} "
            "tokens ({} in the {}, {} in the completion). Please reduce the length of the {} "
            "or completion.",
            max_model_len, num_prompt_tokens + completion, num_prompt_tokens, prompt_param,
            completion, prompt_param),
        prompt_param, "context_length_exceeded"};
  }
  if (requested) return *requested;
  return default_max < 0 ? left : std::min(default_max, left);
}

}  // namespace pagoda::openai

namespace pagoda::openai {

ApiResult<SamplingParams> to_sampling_params(const SamplingFields& f, int64_t max_tokens,
                                             int64_t vocab_size) {
  SamplingParams p;
  p.n = f.n;
  if (f.best_of && !f.use_beam_search) p.best_of = static_cast<int32_t>(*f.best_of);
  auto to_float = [](std::optional<double> v) {
    return v ? std::optional<float>(static_cast<float>(*v)) : std::nullopt;
  };
  p.temperature = to_float(f.temperature);
  p.top_p = to_float(f.top_p);
  if (f.top_k) p.top_k = static_cast<int32_t>(*f.top_k);
  p.min_p = to_float(f.min_p);
  p.repetition_penalty = to_float(f.repetition_penalty);
  p.presence_penalty = static_cast<float>(f.presence_penalty.value_or(0.0));
  p.frequency_penalty = static_cast<float>(f.frequency_penalty.value_or(0.0));
  p.logit_bias = f.logit_bias;
  p.seed = f.seed;
  p.stop = f.stop;
  p.stop_token_ids = f.stop_token_ids;
  p.ignore_eos = f.ignore_eos;
  p.min_tokens = static_cast<int32_t>(f.min_tokens);
  p.max_tokens = static_cast<int32_t>(max_tokens);
  if (f.logprobs >= 0) p.logprobs = f.logprobs;
  if (f.prompt_logprobs >= 0) p.prompt_logprobs = f.prompt_logprobs;
  p.skip_special_tokens = f.skip_special_tokens;
  p.include_stop_str_in_output = f.include_stop_str_in_output;
  p.use_beam_search = f.use_beam_search;
  if (f.use_beam_search) p.beam_width = static_cast<int32_t>(f.best_of.value_or(f.n));
  if (f.length_penalty) p.length_penalty = static_cast<float>(*f.length_penalty);
  p.early_stopping = f.early_stopping;
  Status valid = p.validate(static_cast<int32_t>(vocab_size));
  if (!valid.ok()) return ApiError{400, valid.error().message, "", ""};
  return p;
}

}  // namespace pagoda::openai
