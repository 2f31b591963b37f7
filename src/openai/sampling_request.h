// The request fields that become SamplingParams, shared by /v1/completions and
// /v1/chat/completions, read and range-checked with a precise error per field.
// Unknown fields are ignored; known ones are validated strictly.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "openai/api_error.h"
#include "openai/field_reader.h"

namespace pagoda::openai {

struct SamplingFields {
  int n = 1;
  std::optional<int64_t>
      best_of;  // candidates generated per prompt (>= n); the best n are returned
  std::optional<double> temperature, top_p, min_p;
  std::optional<int64_t> top_k;
  std::optional<double> presence_penalty, frequency_penalty, repetition_penalty;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  std::map<int32_t, float> logit_bias;
  bool ignore_eos = false;
  int64_t min_tokens = 0;
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  std::optional<int64_t> max_tokens;  // max_completion_tokens, else max_tokens
  int logprobs = -1;                  // top alternatives per generated token; -1: no logprobs
  int prompt_logprobs = -1;           // the same for prompt tokens (completions echo); -1: none
  bool use_beam_search = false;       // beam width: best_of, else n
  std::optional<double> length_penalty;
  EarlyStopping early_stopping = EarlyStopping::kFalse;
  int priority = 0;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

inline constexpr int kMaxLogprobs = kMaxLogprobCount;

// Reads n, best_of, temperature, top_p, top_k, min_p, seed, presence_penalty,
// frequency_penalty, repetition_penalty, logit_bias, stop, stop_token_ids,
// ignore_eos, min_tokens, skip_special_tokens, include_stop_str_in_output,
// max_tokens / max_completion_tokens, use_beam_search, length_penalty,
// early_stopping, priority, stream and stream_options. best_of > n and beam
// search pick their results at the end, so they cannot stream. Token ids are checked against
// `vocab_size`. Errors are recorded in `reader`. (logprobs differ between the
// two endpoints: the handlers read them.)
SamplingFields read_sampling_fields(FieldReader& reader, int64_t vocab_size);

// Checks that the prompt and the completion fit the context and returns the
// max_tokens to use: the requested one, else min(default_max, what is left);
// default_max < 0 means "what is left". `prompt_param` names the prompt field
// in errors ("prompt" or "messages").
ApiResult<int64_t> fit_context(int64_t num_prompt_tokens, std::optional<int64_t> requested,
                               int64_t default_max, int64_t max_model_len,
                               const char* prompt_param);

// The engine's SamplingParams for `fields` with the resolved max_tokens.
// Errors from SamplingParams::validate become a 400.
ApiResult<SamplingParams> to_sampling_params(const SamplingFields& fields, int64_t max_tokens,
                                             int64_t vocab_size);

}  // namespace pagoda::openai
