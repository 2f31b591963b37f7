// Per-sequence stop conditions over the generated tokens and their
// detokenized text, for streaming.
//
// Stops, in this order of precedence within one token:
//  - a stop string appearing in the text not yet emitted (the earliest match;
//    on equal positions, the first in SamplingParams::stop),
//  - a stop token: stop_token_ids, or an EOS id unless ignore_eos,
//  - max_tokens reached (finish "length").
// Stop strings and stop tokens count only once min_tokens tokens exist;
// before that, text is emitted as it comes and is not searched.
// Hold-back: a suffix of the text that could begin a stop string is held
// until the next tokens resolve it, so stop text never reaches the client
// unless include_stop_str_in_output (then the text up to the end of the
// matched stop string is emitted). A stop token's own text is dropped
// unless include_stop_str_in_output.
// Structured output adds one more end, decided by the engine: the
// constraint is finished (nothing may follow), and end_complete() ends the
// output there as an EOS would (finish kStop, no stop_reason) without
// waiting for min_tokens: the constraint is the hard rule.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sample/sampling_params.h"

namespace pagoda {

enum class StopFinish { kNone, kStop, kLength };

struct StopUpdate {
  std::string text;  // text safe to emit now (may be empty)
  StopFinish finish = StopFinish::kNone;
  std::string stop_string;  // the matched stop string (finish kStop by string)
  int32_t stop_token = -1;  // the matched stop token (finish kStop by token)
  // The stop token is one of the model's EOS ids and not in the request's
  // stop_token_ids: the answer's stop_reason is null then, as vLLM's (an id
  // the request listed is its stop_reason, EOS or not).
  bool by_eos = false;
  bool finished() const { return finish != StopFinish::kNone; }
};

class StopChecker {
 public:
  // max_tokens: the resolved output cap (the request's max_tokens or what
  // max_model_len leaves), >= 1. eos_token_ids: the model's EOS ids.
  StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
              int32_t max_tokens);

  // Feeds the next generated token and the text its detokenization added.
  // `released`: text of earlier tokens that the detokenizer held back and
  // releases before `token` (flushed because the output stops here, see
  // stops_at); it precedes `text` and is kept even when a stop token's own
  // text is not. Must not be called after a finishing update.
  StopUpdate append(int32_t token, std::string_view text, std::string_view released = {});
  // Ends the output after the last appended token: emits the held-back text
  // and finishes with kStop (no stop string, no stop token). Must not be
  // called after a finishing update.
  StopUpdate end_complete();

  // Whether appending `token` next finishes the output by a stop token (it
  // is one, past min_tokens): the caller flushes its detokenizer first and
  // passes the held-back text of the earlier tokens as `released`, since the
  // stop token's own text may be dropped.
  bool stops_at(int32_t token) const;
  // Whether appending `token` next ends the output whatever its text
  // (stops_at, or max_tokens reached): no id follows, so the caller passes
  // the detokenizer's held-back text with it.
  bool ends_with(int32_t token) const;

  bool finished() const { return finished_; }
  int32_t num_tokens() const { return num_tokens_; }
  // Everything emitted so far.
  const std::string& emitted_text() const { return emitted_; }

 private:
  bool is_request_stop_token(int32_t token) const;
  bool is_stop_token(int32_t token) const;
  // Position and index of the earliest stop string in pending_, or npos.
  size_t find_stop(size_t* which) const;
  // Length of the longest suffix of pending_ that is a proper prefix of a stop string.
  size_t held_suffix() const;
  StopUpdate emit(size_t num_bytes);

  std::vector<std::string> stop_;
  // The request's stop_token_ids, sorted: a lookup per token costs log(n)
  // however long a request makes the list.
  std::vector<int32_t> request_stop_tokens_;
  std::vector<int32_t> eos_tokens_;  // the model's EOS ids; empty with ignore_eos
  bool include_stop_;
  int32_t min_tokens_;
  int32_t max_tokens_;
  int32_t num_tokens_ = 0;
  bool finished_ = false;
  std::string pending_;  // generated, not yet emitted
  std::string emitted_;
};

}  // namespace pagoda
