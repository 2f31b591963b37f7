#include "openai/sampling_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "openai/unsupported_fields.h"
#include "sample/sampling_fields.h"

namespace pagoda::openai {

namespace {

constexpr size_t kMaxStopStrings = 64;

// Field `name` as a V (an integer type, or float) in `range`: a wrong type is
// the reader's error, a value outside the range sampling_fields.h's
// check_range error (`allowed`: as there).
template <typename V>
std::optional<V> read_in_range(FieldReader& reader, const char* name, const FieldRange& range,
                               std::string_view allowed = {}) {
  const Json* value = reader.value(name);
  if (!value) return std::nullopt;
  // The JSON value, widest: int64_t for integer fields, double for the others.
  std::optional<std::conditional_t<std::is_integral_v<V>, int64_t, double>> wide;
  if constexpr (std::is_integral_v<V>) {
    wide = as_integer(*value, INT64_MIN, INT64_MAX);
  } else if (value->is_number()) {
    wide = value->get<double>();
  }
  if (!wide) {
    reader.fail_field(
        name, fmt::format("must be {}, got {}", std::is_integral_v<V> ? "an integer" : "a number",
                          describe_value(*value)));
    return std::nullopt;
  }
  if (auto error = check_range(name, *wide, range, allowed)) {
    reader.fail(invalid_field(name, std::move(error->message)));
    return std::nullopt;
  }
  return static_cast<V>(*wide);
}

// `key` as a token id when it is one in canonical decimal form (digits only:
// no sign, space or leading zero, "0" itself excepted) that fits int32; else
// -1. Whether the vocabulary holds it is SamplingParams::check's rule.
int64_t canonical_token_id(const std::string& key) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return -1;
  int64_t id = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return -1;
    id = id * 10 + (c - '0');
  }
  return id <= INT32_MAX ? id : -1;
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
    const int64_t id = canonical_token_id(key);
    if (id < 0) {
      reader.fail_field(
          "logit_bias",
          fmt::format("has key '{}', which is not a token id in [0, {}) written in canonical "
                      "decimal (digits only: no sign, space or leading zero)",
                      key, vocab_size));
      return bias;
    }
    if (!v.is_number()) {
      reader.fail_field("logit_bias",
                        fmt::format("['{}'] must be a number, got {}", key, describe_value(v)));
      return bias;
    }
    if (auto error = check_logit_bias(v.get<double>())) {
      reader.fail(invalid_field("logit_bias", error->message));
      return bias;
    }
    bias[static_cast<int32_t>(id)] = v.get<float>();
  }
  return bias;
}

void read_stop(FieldReader& reader, SamplingParams& p) {
  p.stop = reader.string_list("stop").value_or(std::vector<std::string>{});
  if (p.stop.size() > kMaxStopStrings) {
    reader.fail_field("stop", fmt::format("holds {} strings; at most {} are allowed", p.stop.size(),
                                          kMaxStopStrings));
  }
}

// Sorted and once each; the vocabulary check is SamplingParams::check's.
void read_allowed_token_ids(FieldReader& reader, SamplingParams& p) {
  auto ids = reader.integer_list("allowed_token_ids", INT32_MIN, INT32_MAX);
  if (!ids) return;
  if (ids->empty()) {
    reader.fail_field("allowed_token_ids",
                      "must hold at least one token id (omit it to allow every token)");
    return;
  }
  p.allowed_token_ids.assign(ids->begin(), ids->end());
  std::sort(p.allowed_token_ids.begin(), p.allowed_token_ids.end());
  p.allowed_token_ids.erase(std::unique(p.allowed_token_ids.begin(), p.allowed_token_ids.end()),
                            p.allowed_token_ids.end());
}

void read_early_stopping(FieldReader& reader, SamplingParams& p) {
  const Json* value = reader.value("early_stopping");
  if (!value) return;
  if (value->is_boolean()) {
    p.early_stopping = value->get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kFalse;
  } else if (value->is_string() && *value == "never") {
    p.early_stopping = EarlyStopping::kNever;
  } else {
    reader.fail_field("early_stopping", fmt::format("must be true, false or \"never\", got {}",
                                                    describe_value(*value)));
  }
}

// The fields of sampling_fields.h's lists that requests carry.
void read_listed_fields(FieldReader& reader, SamplingParams& p) {
  for_each_numeric_field([&](const auto& field) {
    using Value = typename std::decay_t<decltype(field)>::Value;
    if (!field.in_request) return;
    // field.name is a string literal: data() is null-terminated.
    if (auto v = read_in_range<Value>(reader, field.name.data(), field.range, field.allowed))
      p.*field.member = *v;
  });
  for (const BoolField& field : kBoolSamplingFields) {
    if (auto v = reader.boolean(field.name.data())) p.*field.member = *v;
  }
}

void read_max_tokens(FieldReader& reader, SamplingRequest& r) {
  const auto max_tokens = reader.integer("max_tokens", 0, INT32_MAX);
  const auto max_completion_tokens = reader.integer("max_completion_tokens", 0, INT32_MAX);
  r.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  if (r.max_tokens && *r.max_tokens > 0) r.params.max_tokens = static_cast<int32_t>(*r.max_tokens);
}

void read_stream_fields(FieldReader& reader, SamplingRequest& r) {
  r.stream = reader.boolean("stream").value_or(false);
  const Json* options = reader.value("stream_options");
  if (!options) return;
  if (!options->is_object()) {
    reader.fail_field("stream_options",
                      fmt::format("must be an object, got {}", describe_value(*options)));
    return;
  }
  if (!r.stream) {
    reader.fail_field("stream_options", "is only allowed when 'stream' is true");
    return;
  }
  FieldReader nested(*options, "stream_options.");
  r.include_usage = nested.boolean("include_usage").value_or(false);
  // Recognised, not honoured: usage comes once, in the last chunk.
  if (nested.boolean("continuous_usage_stats").value_or(false)) {
    nested.fail_field("continuous_usage_stats",
                      "is not supported: usage comes in the last chunk (include_usage)");
  }
  if (nested.error()) reader.fail(*nested.error());
}

}  // namespace

SamplingRequest read_sampling_request(FieldReader& reader, int64_t vocab_size) {
  SamplingRequest r;
  SamplingParams& p = r.params;
  read_listed_fields(reader, p);
  if (auto seed = reader.integer("seed", INT64_MIN, INT64_MAX))
    p.seed = static_cast<uint64_t>(*seed);
  p.logit_bias = read_logit_bias(reader, vocab_size);
  read_stop(reader, p);
  if (auto ids = reader.integer_list("stop_token_ids", INT32_MIN, INT32_MAX)) {
    // Sorted and without repeats, so the list is never longer than the
    // vocabulary, whatever the body repeats (the engine walks it per step
    // while min_tokens bans these ids).
    p.stop_token_ids.assign(ids->begin(), ids->end());
    std::sort(p.stop_token_ids.begin(), p.stop_token_ids.end());
    p.stop_token_ids.erase(std::unique(p.stop_token_ids.begin(), p.stop_token_ids.end()),
                           p.stop_token_ids.end());
  }
  read_allowed_token_ids(reader, p);
  read_early_stopping(reader, p);
  read_max_tokens(reader, r);
  if (p.use_beam_search) {
    p.beam_width = p.best_of.value_or(p.n);
    p.best_of.reset();
  }
  r.priority = static_cast<int>(reader.integer("priority", INT32_MIN, INT32_MAX).value_or(0));
  r.speculative = reader.boolean("speculative_decoding").value_or(true);
  reader.string("user");
  read_stream_fields(reader, r);
  if (r.stream && (p.use_beam_search || p.best_of.value_or(p.n) > p.n)) {
    reader.fail_field("stream", "cannot be used with best_of > n or use_beam_search");
  }
  r.constraint_source = read_constraint_source(reader);
  if (r.constraint_source) {
    if (auto error = constraint_fit_error(p, r.constraint_source->field)) reader.fail(*error);
  }
  refuse_unsupported_fields(reader);
  if (!reader.error()) {
    if (auto error = sampling_params_error(p, vocab_size)) reader.fail(*error);
  }
  return r;
}

std::optional<ApiError> constraint_fit_error(const SamplingParams& params,
                                             const std::string& field) {
  if (!params.use_beam_search) return std::nullopt;
  return invalid_field(
      "use_beam_search",
      fmt::format("'use_beam_search' cannot be combined with a structured-output constraint ('{}')",
                  field));
}

std::optional<int32_t> read_logprob_count(FieldReader& reader, const char* name) {
  return read_in_range<int32_t>(reader, name, kLogprobCountRange);
}

std::optional<int32_t> read_prompt_logprobs(FieldReader& reader, bool stream) {
  auto count = read_logprob_count(reader, "prompt_logprobs");
  if (count && stream) {
    reader.fail_field("prompt_logprobs",
                      "is not available when 'stream' is true (they come with the whole response)");
  }
  return count;
}

std::optional<ApiError> sampling_params_error(const SamplingParams& params, int64_t vocab_size) {
  std::optional<SamplingFieldError> error = params.check(static_cast<int32_t>(vocab_size));
  if (!error) return std::nullopt;
  // A request gives the beam width as best_of.
  std::string param = error->field == "beam_width" ? "best_of" : std::move(error->field);
  return invalid_field(std::move(param), std::move(error->message));
}

ApiError request_limit_error(const RequestLimitError& error, const char* prompt_param) {
  if (error.limit == RequestLimit::kContextLength) {
    return ApiError{400, error.message, prompt_param, "context_length_exceeded"};
  }
  return ApiError{400, error.message, "", ""};
}

}  // namespace pagoda::openai
