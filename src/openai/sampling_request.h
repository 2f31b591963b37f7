// A generation request's fields, shared by /v1/completions and
// /v1/chat/completions: the sampling fields, read straight into
// SamplingParams by the field list of sample/sampling_fields.h (names,
// ranges, the one error text), and the request-level fields beside them.
// Unknown fields are ignored; known ones are validated strictly.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/engine_api.h"
#include "engine/request_fit.h"
#include "openai/api_error.h"
#include "openai/field_reader.h"
#include "openai/structured_output_request.h"

namespace pagoda::openai {

struct SamplingRequest {
  // max_tokens: the requested value while it is >= 1, until the endpoint
  // resolves it; logprobs and prompt_logprobs: set by the endpoint.
  SamplingParams params;
  // max_completion_tokens, else max_tokens, as sent (>= 0; 0 asks for the
  // echo alone): what the endpoint resolves params.max_tokens from.
  std::optional<int64_t> max_tokens;
  int priority = 0;
  // speculative_decoding: false keeps the request out of speculative
  // decoding (GenerateRequest::speculative); outputs are the same either way.
  bool speculative = true;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Structured output (structured_output_request.h): the request's one
  // constraint source, and once the endpoint compiled it, the constraint
  // every sample follows (GenerateRequest::constraint).
  std::optional<ConstraintSource> constraint_source;
  std::shared_ptr<const CompiledConstraint> constraint;
};

// Reads the request fields of sample/sampling_fields.h's lists (n, best_of,
// temperature, top_p, top_k, min_p, presence_penalty, frequency_penalty,
// repetition_penalty, min_tokens, length_penalty; ignore_eos,
// skip_special_tokens, include_stop_str_in_output, use_beam_search), then
// seed, logit_bias, stop, stop_token_ids, allowed_token_ids (non-empty,
// kept sorted and once each), early_stopping, max_tokens /
// max_completion_tokens, priority, speculative_decoding, user, stream,
// stream_options and the
// structured-output fields (read_constraint_source; not with use_beam_search),
// and checks the result (sampling_params_error). With
// use_beam_search, best_of (else n) is the beam width. best_of > n and beam
// search pick their results at the end, so they cannot stream. Errors are
// recorded in `reader`. (logprobs differ between the two endpoints: they
// read them with read_logprob_count; bad_words needs the tokenizer:
// openai/bad_words.h's read_bad_words.)
SamplingRequest read_sampling_request(FieldReader& reader, int64_t vocab_size);

// Whether a structured-output constraint from `field` can be honoured with
// `params`: use_beam_search (beams are not constrained) is a 400 naming it;
// nullopt when it can.
std::optional<ApiError> constraint_fit_error(const SamplingParams& params,
                                             const std::string& field);

// Reads field `name` as a logprobs count: an integer in sampling_fields.h's
// kLogprobCountRange (0..20), refused with its error text.
std::optional<int32_t> read_logprob_count(FieldReader& reader, const char* name);

// prompt_logprobs: a logprobs count (as above) of alternatives per prompt
// token. Refused with `stream`: they come with the whole response (vLLM
// refuses them in a stream too).
std::optional<int32_t> read_prompt_logprobs(FieldReader& reader, bool stream);

// SamplingParams::check as a 400 naming the request's field (best_of for the
// beam width); nullopt when `params` is valid.
std::optional<ApiError> sampling_params_error(const SamplingParams& params, int64_t vocab_size);

// A refusal of engine/request_fit.h (the engine's one check of a request's
// limits) as a 400: the context is code context_length_exceeded naming
// `prompt_param` ("prompt" or "messages"); the seats and the KV pool name no
// field, as when add_request refuses them.
ApiError request_limit_error(const RequestLimitError& error, const char* prompt_param);

}  // namespace pagoda::openai
