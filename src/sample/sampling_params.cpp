#include "sample/sampling_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>

namespace pagoda {

namespace {

Error out_of_range(const char* field, const std::string& value, const std::string& allowed) {
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("sampling parameter '{}' = {} is out of range: must be {}", field,
                                value, allowed));
}

Status check_float(const char* field, float v, float lo, float hi, bool lo_open,
                   const char* allowed) {
  bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  return ok ? Status::Ok() : Status(out_of_range(field, fmt::format("{}", v), allowed));
}

Status check_int(const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return Status::Ok();
  return out_of_range(field, std::to_string(v), fmt::format("in [{}, {}]", lo, hi));
}

Status check_token(const char* field, int32_t token, int32_t vocab_size) {
  if (token >= 0 && token < vocab_size) return Status::Ok();
  return out_of_range(field, std::to_string(token),
                      fmt::format("a token id in [0, {})", vocab_size));
}

int32_t clamp_to_int32(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
}

}  // namespace

void SamplingParams::apply_defaults(const SamplingDefaults& d) {
  if (!temperature && d.temperature) temperature = static_cast<float>(*d.temperature);
  if (!top_p && d.top_p) top_p = static_cast<float>(*d.top_p);
  if (!top_k && d.top_k) top_k = clamp_to_int32(*d.top_k);
  if (!min_p && d.min_p) min_p = static_cast<float>(*d.min_p);
  if (!repetition_penalty && d.repetition_penalty)
    repetition_penalty = static_cast<float>(*d.repetition_penalty);
  if (!max_tokens && d.max_new_tokens) max_tokens = clamp_to_int32(*d.max_new_tokens);
}

Status SamplingParams::validate(int32_t vocab_size) const {
  if (vocab_size < 1) return out_of_range("vocab_size", std::to_string(vocab_size), ">= 1");
  PAGODA_RETURN_IF_ERROR(check_int("n", n, 1, kMaxNumSamples));
  if (best_of) {
    PAGODA_RETURN_IF_ERROR(check_int("best_of", *best_of, n, kMaxNumSamples));
    if (*best_of > 1 && is_greedy())
      return out_of_range("best_of", std::to_string(*best_of),
                          "1 with greedy sampling (temperature 0)");
  }
  PAGODA_RETURN_IF_ERROR(check_float("temperature", effective_temperature(), 0.0f, 1e6f, false,
                                     "a finite number >= 0"));
  PAGODA_RETURN_IF_ERROR(
      check_float("top_p", top_p.value_or(kDefaultTopP), 0.0f, 1.0f, true, "in (0, 1]"));
  PAGODA_RETURN_IF_ERROR(check_int("top_k", top_k.value_or(kDefaultTopK), -1, INT32_MAX));
  PAGODA_RETURN_IF_ERROR(
      check_float("min_p", min_p.value_or(kDefaultMinP), 0.0f, 1.0f, false, "in [0, 1]"));
  PAGODA_RETURN_IF_ERROR(check_float("repetition_penalty",
                                     repetition_penalty.value_or(kDefaultRepetitionPenalty), 0.0f,
                                     100.0f, true, "in (0, 100]"));
  PAGODA_RETURN_IF_ERROR(
      check_float("presence_penalty", presence_penalty, -2.0f, 2.0f, false, "in [-2, 2]"));
  PAGODA_RETURN_IF_ERROR(
      check_float("frequency_penalty", frequency_penalty, -2.0f, 2.0f, false, "in [-2, 2]"));
  for (const auto& [token, bias] : logit_bias) {
    PAGODA_RETURN_IF_ERROR(check_token("logit_bias", token, vocab_size));
    PAGODA_RETURN_IF_ERROR(
        check_float("logit_bias", bias, -100.0f, 100.0f, false, "a bias in [-100, 100]"));
  }
  for (const std::string& s : stop) {
    if (s.empty()) return out_of_range("stop", "\"\"", "non-empty strings");
  }
  for (int32_t t : stop_token_ids)
    PAGODA_RETURN_IF_ERROR(check_token("stop_token_ids", t, vocab_size));
  if (max_tokens) PAGODA_RETURN_IF_ERROR(check_int("max_tokens", *max_tokens, 1, INT32_MAX));
  PAGODA_RETURN_IF_ERROR(check_int("min_tokens", min_tokens, 0, max_tokens.value_or(INT32_MAX)));
  if (logprobs) PAGODA_RETURN_IF_ERROR(check_int("logprobs", *logprobs, 0, kMaxLogprobCount));
  if (prompt_logprobs)
    PAGODA_RETURN_IF_ERROR(check_int("prompt_logprobs", *prompt_logprobs, 0, kMaxLogprobCount));
  if (use_beam_search) {
    PAGODA_RETURN_IF_ERROR(check_int("beam_width", beam_width, 1, kMaxBeamWidth));
    PAGODA_RETURN_IF_ERROR(check_int("n", n, 1, beam_width));
    if (best_of) return out_of_range("best_of", std::to_string(*best_of), "unset with beam search");
    PAGODA_RETURN_IF_ERROR(
        check_float("length_penalty", length_penalty, -1e6f, 1e6f, false, "a finite number"));
  }
  return Status::Ok();
}

}  // namespace pagoda
