// The one check of a request against the engine's limits: the context
// (prompt + max_tokens within max_model_len), the sequence seats (n, best_of
// or the beam width within --max-num-seqs) and the KV pool. Written once, with
// one text per limit: LlmEngine::add_request applies it, and frontends call it
// first to refuse a request with the same text before submitting it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "engine/engine_api.h"

namespace pagoda {

// What one request asks of the engine.
struct RequestSize {
  int64_t num_prompt_tokens = 0;
  std::optional<int64_t> max_tokens = std::nullopt;  // the completion length asked for
  // max_tokens unset: min(this, what the context leaves after the prompt);
  // both unset: what it leaves.
  std::optional<int64_t> default_max_tokens = std::nullopt;
  int64_t num_seqs = 1;                     // sequences run at once: SamplingParams::num_seqs()
  std::string_view prompt_name = "prompt";  // the prompt in the context error ("messages")
};

enum class RequestLimit {
  kContextLength,  // no token left after the prompt, or prompt + max_tokens > max_model_len
  kNumSeqs,        // num_seqs > max_num_seqs
  kKvBlocks,       // num_seqs sequences of prompt + max_tokens tokens, no block shared, > the pool
                   // (or > the sliding-window pool: their windows' blocks)
};

struct RequestLimitError {
  RequestLimit limit = RequestLimit::kContextLength;
  std::string message;
};

// The context alone (num_seqs is not looked at): the max_tokens the request
// runs with, or kContextLength.
Result<int64_t, RequestLimitError> fit_context(const ModelInfo& info, const RequestSize& request);

// fit_context, then the seats and the KV pool for the max_tokens it gives.
// A group whose worst case (every sequence at full length, nothing shared)
// exceeds the pool could be preempted forever: the scheduler takes only
// requests that pass (Scheduler::add_request).
Result<int64_t, RequestLimitError> fit_request(const ModelInfo& info, const RequestSize& request);

}  // namespace pagoda
