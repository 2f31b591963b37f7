// Everything a request can set about how its tokens are chosen and when
// generation stops, with validation against the model's vocabulary and
// merging with the model's generation_config defaults. Each field's name,
// range and generation_config source are declared once, in
// sample/sampling_fields.h; validation and defaults walk that list.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/model_config.h"

namespace pagoda {

// Hugging Face beam-search early stopping: kTrue stops as soon as beam_width
// hypotheses are finished; kFalse stops when the best running beam, scored
// at its current length, cannot beat the worst finished one; kNever scores
// the running beam at the longest possible length when length_penalty > 0
// (the exact bound: canonical beam search).
enum class EarlyStopping { kFalse, kTrue, kNever };

inline constexpr float kDefaultTemperature = 1.0f;
inline constexpr float kMaxTemperature = 2.0f;
inline constexpr float kDefaultTopP = 1.0f;
inline constexpr int32_t kDefaultTopK = 0;  // off
inline constexpr float kDefaultMinP = 0.0f;
inline constexpr float kDefaultRepetitionPenalty = 1.0f;
inline constexpr int32_t kMaxLogprobCount = 20;
inline constexpr int32_t kMaxNumSamples = 128;
inline constexpr int32_t kMaxBeamWidth = 16;

// A field that SamplingParams::check refuses: its name (as in requests) and
// "'<name>' = <value> is out of range: must be <allowed>".
struct SamplingFieldError {
  std::string field;
  std::string message;
};

struct SamplingParams {
  int32_t n = 1;                   // sequences returned
  std::optional<int32_t> best_of;  // sequences generated (>= n); the n with the highest cumulative
                                   // logprob are returned

  // Unset: generation_config's value (apply_defaults), else the kDefault* constant.
  std::optional<float> temperature;         // [0, 2]; 0: greedy
  std::optional<float> top_p;               // (0, 1]
  std::optional<int32_t> top_k;             // 0 or -1: off
  std::optional<float> min_p;               // [0, 1]
  std::optional<float> repetition_penalty;  // > 0; 1: off
  float presence_penalty = 0.0f;            // [-2, 2]
  float frequency_penalty = 0.0f;           // [-2, 2]
  std::map<int32_t, float> logit_bias;      // token id -> added to its logit, [-100, 100]
  // Only these tokens may be sampled (vLLM's allowed_token_ids; EOS is not
  // added): ascending, each once; empty: every token. The engine packs them
  // once per request into the sampler's mask (batch/sampling_batch.h).
  std::vector<int32_t> allowed_token_ids;
  // vLLM's bad_words, tokenized (openai/bad_words.h): a word's last token is
  // banned (-inf) whenever the output so far ends with its other tokens
  // (a one-token word: always). Each non-empty.
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  std::optional<uint64_t> seed;             // unset: the engine draws one per request

  std::vector<std::string> stop;  // stop strings (non-empty)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;  // EOS does not stop (stop_token_ids still do)
  int32_t min_tokens = 0;   // no stop (token or string) before this many tokens
  std::optional<int32_t>
      max_tokens;  // unset: generation_config max_new_tokens, else up to max_model_len

  std::optional<int32_t>
      logprobs;  // top alternatives per output token, 0..20 (0: the sampled token only)
  std::optional<int32_t> prompt_logprobs;  // the same for prompt tokens
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;

  bool use_beam_search = false;  // deterministic beam search; n best hypotheses returned
  int32_t beam_width = 1;
  float length_penalty = 1.0f;  // score = sum_logprobs / length^length_penalty
  EarlyStopping early_stopping = EarlyStopping::kFalse;

  float effective_temperature() const { return temperature.value_or(kDefaultTemperature); }
  bool is_greedy() const { return effective_temperature() < 1e-5f; }
  // Sequences the request runs at once (the scheduler's RequestSpec::num_seqs).
  int32_t num_seqs() const { return use_beam_search ? beam_width : best_of.value_or(n); }

  // Fills each unset field that generation_config provides (the fields
  // sampling_fields.h declares with a GenerationDefaults source).
  void apply_defaults(const GenerationDefaults& defaults);
  // The first field that breaks its range (sampling_fields.h) or a rule
  // between fields (best_of >= n and 1 when greedy, min_tokens <= max_tokens,
  // token ids below vocab_size, non-empty stop strings and bad words, beam
  // search's n <= beam_width and no best_of, allowed_token_ids or bad_words);
  // nullopt when all are valid.
  std::optional<SamplingFieldError> check(int32_t vocab_size) const;
  // check() as a Status: kInvalidArgument with its message.
  Status validate(int32_t vocab_size) const;
};

}  // namespace pagoda
