// The one declaration of SamplingParams' fields: for each numeric field its
// name (the request's JSON field and the name errors use), its member, the
// values it allows and the generation_config value an unset field takes; for
// each boolean field its name and member. Everything that reads, checks or
// completes SamplingParams walks these lists: the server's JSON reader
// (openai/sampling_request.cpp), SamplingParams::check/validate (with the one
// error text, out_of_range_message) and SamplingParams::apply_defaults.
//
// logit_bias, stop, stop_token_ids, seed and early_stopping have shapes of
// their own (maps, lists, an enum): the reader parses them by hand, and
// SamplingParams::check applies their rules (check_logit_bias for the bias
// values) with the same error text.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "io/model_config.h"
#include "sample/sampling_params.h"

namespace pagoda {

// The values a numeric field allows: [lo, hi], or (lo, hi] when lo_open.
// NaN is never inside.
struct FieldRange {
  double lo = 0.0;
  double hi = 0.0;
  bool lo_open = false;

  constexpr bool contains(double v) const { return (lo_open ? v > lo : v >= lo) && v <= hi; }
  // "[lo, hi]", or "(lo, hi]".
  std::string interval() const;
};

// "'<name>' = <value> is out of range: must be <allowed>": the error text of
// every sampling field, in SamplingParams::check and in the server's reader.
std::string out_of_range_message(std::string_view name, std::string_view value,
                                 std::string_view allowed);

template <typename V>
SamplingFieldError out_of_range(std::string_view name, V value, std::string_view allowed) {
  return {std::string(name), out_of_range_message(name, fmt::format("{}", value), allowed)};
}

// The error for value `v` of field `name` (the field's type, or the wider
// one read from JSON), or nullopt when `range` holds it. `allowed`: the range
// in words where "in " + range.interval() does not say it.
template <typename V>
std::optional<SamplingFieldError> check_range(std::string_view name, V v, const FieldRange& range,
                                              std::string_view allowed = {}) {
  if (range.contains(static_cast<double>(v))) return std::nullopt;
  return out_of_range(name, v, allowed.empty() ? "in " + range.interval() : std::string(allowed));
}

// The member's value type: T of std::optional<T>, else the member's type.
template <typename M>
struct FieldValue {
  using type = M;
};
template <typename T>
struct FieldValue<std::optional<T>> {
  using type = T;
};

// A numeric field of type M (int32_t or float, or std::optional of one: unset
// means "generation_config's value, else the built-in default").
// G: the type of its GenerationDefaults source (double or int64_t).
template <typename M, typename G = double>
struct NumericField {
  using Value = typename FieldValue<M>::type;
  static constexpr bool kOptional = !std::is_same_v<M, Value>;

  std::string_view name;
  M SamplingParams::*member = nullptr;
  FieldRange range;
  // The range in words where "in " + range.interval() does not say it.
  std::string_view allowed = {};
  // Read from the request's field `name` by the common reader; false where
  // the endpoint reads it (max_tokens, logprobs) or another field gives it
  // (beam_width: best_of under beam search).
  bool in_request = true;
  std::optional<G> GenerationDefaults::*generation = nullptr;  // generation_config's value

  template <typename V>
  std::optional<SamplingFieldError> check(V v) const {
    return check_range(name, v, range, allowed);
  }
};

struct BoolField {
  std::string_view name;
  bool SamplingParams::*member = nullptr;
};

// logprobs and prompt_logprobs: top alternatives per token (0: the token only).
inline constexpr FieldRange kLogprobCountRange{0, kMaxLogprobCount};
// A logit_bias value.
inline constexpr FieldRange kLogitBiasRange{-100, 100};

// The error for logit_bias value `bias` (float, or the double read from
// JSON), or nullopt when kLogitBiasRange holds it.
template <typename V>
std::optional<SamplingFieldError> check_logit_bias(V bias) {
  return check_range("logit_bias", bias, kLogitBiasRange,
                     "a bias in " + kLogitBiasRange.interval());
}

// In the order check() tests them and the reader reads them.
inline constexpr auto kNumericSamplingFields = std::make_tuple(
    NumericField<int32_t>{.name = "n", .member = &SamplingParams::n, .range = {1, kMaxNumSamples}},
    // Also >= n, and 1 with greedy sampling (SamplingParams::check).
    NumericField<std::optional<int32_t>>{
        .name = "best_of", .member = &SamplingParams::best_of, .range = {1, kMaxNumSamples}},
    NumericField<std::optional<float>>{.name = "temperature",
                                       .member = &SamplingParams::temperature,
                                       .range = {0, kMaxTemperature},
                                       .allowed = "a finite number >= 0 and at most 2",
                                       .generation = &GenerationDefaults::temperature},
    NumericField<std::optional<float>>{.name = "top_p",
                                       .member = &SamplingParams::top_p,
                                       .range = {0, 1, true},
                                       .generation = &GenerationDefaults::top_p},
    NumericField<std::optional<int32_t>, int64_t>{.name = "top_k",
                                                  .member = &SamplingParams::top_k,
                                                  .range = {-1, INT32_MAX},
                                                  .generation = &GenerationDefaults::top_k},
    NumericField<std::optional<float>>{.name = "min_p",
                                       .member = &SamplingParams::min_p,
                                       .range = {0, 1},
                                       .generation = &GenerationDefaults::min_p},
    NumericField<std::optional<float>>{.name = "repetition_penalty",
                                       .member = &SamplingParams::repetition_penalty,
                                       .range = {0, 100, true},
                                       .generation = &GenerationDefaults::repetition_penalty},
    NumericField<float>{
        .name = "presence_penalty", .member = &SamplingParams::presence_penalty, .range = {-2, 2}},
    NumericField<float>{.name = "frequency_penalty",
                        .member = &SamplingParams::frequency_penalty,
                        .range = {-2, 2}},
    // Also <= max_tokens (SamplingParams::check).
    NumericField<int32_t>{
        .name = "min_tokens", .member = &SamplingParams::min_tokens, .range = {0, INT32_MAX}},
    NumericField<std::optional<int32_t>, int64_t>{
        .name = "max_tokens",
        .member = &SamplingParams::max_tokens,
        .range = {1, INT32_MAX},
        .in_request = false,
        .generation = &GenerationDefaults::max_new_tokens},
    NumericField<std::optional<int32_t>>{.name = "logprobs",
                                         .member = &SamplingParams::logprobs,
                                         .range = kLogprobCountRange,
                                         .in_request = false},
    NumericField<std::optional<int32_t>>{.name = "prompt_logprobs",
                                         .member = &SamplingParams::prompt_logprobs,
                                         .range = kLogprobCountRange,
                                         .in_request = false},
    NumericField<int32_t>{.name = "beam_width",
                          .member = &SamplingParams::beam_width,
                          .range = {1, kMaxBeamWidth},
                          .in_request = false},
    NumericField<float>{
        .name = "length_penalty", .member = &SamplingParams::length_penalty, .range = {-1e6, 1e6}});

inline constexpr BoolField kBoolSamplingFields[] = {
    {"ignore_eos", &SamplingParams::ignore_eos},
    {"skip_special_tokens", &SamplingParams::skip_special_tokens},
    {"include_stop_str_in_output", &SamplingParams::include_stop_str_in_output},
    {"use_beam_search", &SamplingParams::use_beam_search},
};

// Clears each generation_config value that its field's range does not hold
// (a temperature of 3, a max_new_tokens of 0), so that requests leaving the
// field unset get the built-in default instead of an error they did not
// cause. Returns one error per value cleared, for the engine to log once.
std::vector<SamplingFieldError> drop_out_of_range_defaults(GenerationDefaults& defaults);

// The set values of `defaults` by request field name, for the start-up log:
// "temperature=0.2 top_p=0.9" ("" when none is set).
std::string describe_generation_defaults(const GenerationDefaults& defaults);

// Calls f(field) for each numeric field, in order.
template <typename F>
void for_each_numeric_field(F&& f) {
  std::apply([&](const auto&... field) { (f(field), ...); }, kNumericSamplingFields);
}

}  // namespace pagoda
