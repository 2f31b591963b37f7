#include "sample/sampling_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "sample/sampling_fields.h"

namespace pagoda {

namespace {

std::optional<SamplingFieldError> check_token(std::string_view field, int32_t token,
                                              int32_t vocab_size) {
  if (token >= 0 && token < vocab_size) return std::nullopt;
  return out_of_range(field, token, fmt::format("a token id in [0, {})", vocab_size));
}

// "in [lo, hi]" for a range that depends on another field.
std::string in_range(int64_t lo, int64_t hi) {
  return "in " + FieldRange{static_cast<double>(lo), static_cast<double>(hi)}.interval();
}

// Each numeric field against its declared range (unset ones pass), in order.
std::optional<SamplingFieldError> check_ranges(const SamplingParams& p) {
  std::optional<SamplingFieldError> error;
  for_each_numeric_field([&](const auto& field) {
    if (error) return;
    const auto& value = p.*field.member;
    if constexpr (std::decay_t<decltype(field)>::kOptional) {
      if (value) error = field.check(*value);
    } else {
      error = field.check(value);
    }
  });
  return error;
}

std::optional<SamplingFieldError> check_lists(const SamplingParams& p, int32_t vocab_size) {
  for (const auto& [token, bias] : p.logit_bias) {
    if (auto e = check_token("logit_bias", token, vocab_size)) return e;
    if (auto e = check_logit_bias(bias)) return e;
  }
  for (const std::string& s : p.stop) {
    if (s.empty()) return out_of_range("stop", "\"\"", "non-empty strings");
  }
  for (int32_t t : p.stop_token_ids) {
    if (auto e = check_token("stop_token_ids", t, vocab_size)) return e;
  }
  for (int32_t t : p.allowed_token_ids) {
    if (auto e = check_token("allowed_token_ids", t, vocab_size)) return e;
  }
  for (const std::vector<int32_t>& word : p.bad_words_token_ids) {
    if (word.empty()) return out_of_range("bad_words", "[]", "non-empty token sequences");
    for (int32_t t : word) {
      if (auto e = check_token("bad_words", t, vocab_size)) return e;
    }
  }
  return std::nullopt;
}

}  // namespace

void SamplingParams::apply_defaults(const GenerationDefaults& defaults) {
  for_each_numeric_field([&](const auto& field) {
    using Field = std::decay_t<decltype(field)>;
    if constexpr (Field::kOptional) {
      if (field.generation == nullptr) return;
      auto& value = this->*field.member;
      const auto& fallback = defaults.*field.generation;
      if (value || !fallback) return;
      using Value = typename Field::Value;
      if constexpr (std::is_integral_v<Value>) {
        value = static_cast<Value>(std::clamp<int64_t>(*fallback, INT32_MIN, INT32_MAX));
      } else {
        value = static_cast<Value>(*fallback);
      }
    }
  });
}

std::optional<SamplingFieldError> SamplingParams::check(int32_t vocab_size) const {
  if (vocab_size < 1) return out_of_range("vocab_size", vocab_size, ">= 1");
  if (auto e = check_ranges(*this)) return e;
  if (best_of) {
    if (*best_of < n) return out_of_range("best_of", *best_of, in_range(n, kMaxNumSamples));
    if (*best_of > 1 && is_greedy())
      return out_of_range("best_of", *best_of, "1 with greedy sampling (temperature 0)");
  }
  if (max_tokens && min_tokens > *max_tokens)
    return out_of_range("min_tokens", min_tokens, in_range(0, *max_tokens));
  if (auto e = check_lists(*this, vocab_size)) return e;
  if (use_beam_search) {
    if (n > beam_width) return out_of_range("n", n, in_range(1, beam_width));
    if (best_of) return out_of_range("best_of", *best_of, "unset with beam search");
    // Beam rows rank raw logprobs, unprocessed (sample/sampling_rows.h).
    if (!allowed_token_ids.empty())
      return SamplingFieldError{"allowed_token_ids", "'allowed_token_ids' cannot be used with beam search"};
    if (!bad_words_token_ids.empty())
      return SamplingFieldError{"bad_words", "'bad_words' cannot be used with beam search"};
  }
  return std::nullopt;
}

Status SamplingParams::validate(int32_t vocab_size) const {
  if (auto e = check(vocab_size)) return make_error(ErrorCode::kInvalidArgument, e->message);
  return Status::Ok();
}

}  // namespace pagoda
