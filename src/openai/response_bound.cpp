#include "openai/response_bound.h"

#include <fmt/format.h>

#include <algorithm>

namespace pagoda::openai {

namespace {

constexpr int64_t kOrdinaryTokenBytes = 16;  // longest token text counted (ordinary tokens)
constexpr int64_t kNumberBytes = 24;         // a logprob as JSON ("-1.2345678901234567e-05")
constexpr int64_t kOffsetBytes = 12;         // a text_offset and its comma
constexpr int64_t kTokenIdBytes = 11;        // a token id and its comma ("2147483647,")
constexpr int64_t kEnvelopeBytes = 1024;     // id, object, model, usage, ...
constexpr int64_t kReasoningKeyBytes = 48;   // "reasoning_content":,"reasoning": and their quotes
constexpr int64_t kChoiceBytes = 256;        // index, finish_reason, stop_reason, logprobs keys

// Bytes one scored token adds to a choice's logprobs; `raw`: bytes of its
// text, `text`: the same escaped for JSON.
int64_t logprob_entry_bytes(bool chat, int logprobs, int64_t raw, int64_t text) {
  const int64_t quoted = text + 2;
  const int64_t num_top = logprobs;
  if (chat) {
    // {"token":T,"logprob":N,"bytes":[...],"top_logprobs":[ alternatives ]},
    // bytes: up to 4 characters ("255,") per byte of the token.
    const int64_t entry = 33 + quoted + kNumberBytes + 4 * raw;
    return entry + 18 + num_top * entry;
  }
  // tokens: "T", token_logprobs: N, text_offset, top_logprobs: {"T": N, ...}
  // holding the alternatives and the token itself.
  const int64_t pair = quoted + 2 + kNumberBytes;
  return quoted + 1 + kNumberBytes + 1 + kOffsetBytes + 2 + (num_top + 1) * pair;
}

// Bytes of one prompt_logprobs entry: {"ID":{"logprob":N,"rank":R,"decoded_token":T},...}
// with the token itself and `num_top` alternatives.
int64_t prompt_logprob_entry_bytes(int num_top, int64_t text) {
  const int64_t one = kTokenIdBytes + 3 + 38 + kNumberBytes + kTokenIdBytes + text + 2;
  return 3 + (num_top + 1) * one;
}

}  // namespace

int64_t estimate_response_bytes(const ResponseShape& shape, int64_t max_token_bytes) {
  // Escaped, each byte takes at most 2 characters ("\n", "\""), and one
  // control byte 6 ("\u0001").
  const int64_t raw = std::min(std::max<int64_t>(max_token_bytes, 1), kOrdinaryTokenBytes);
  const int64_t text = 2 * raw + 6;
  int64_t per_token = shape.reasoning ? 2 * text : text;
  if (shape.logprobs >= 0) per_token += logprob_entry_bytes(shape.chat, shape.logprobs, raw, text);
  if (shape.token_ids) per_token += kTokenIdBytes;
  const int64_t choice_bytes = kChoiceBytes + (shape.reasoning ? kReasoningKeyBytes : 0);
  int64_t total = kEnvelopeBytes + shape.num_choices * (choice_bytes + shape.max_tokens * per_token);
  int64_t per_prompt_token = shape.token_ids ? kTokenIdBytes : 0;
  if (shape.prompt_logprobs >= 0)
    per_prompt_token += prompt_logprob_entry_bytes(shape.prompt_logprobs, text);
  total += shape.prompt_tokens * per_prompt_token;
  total += 2 * shape.echo_bytes;
  if (shape.logprobs >= 0) total += shape.echo_tokens * logprob_entry_bytes(shape.chat, shape.logprobs, raw, text);
  return total;
}

std::optional<ApiError> check_response_size(const ResponseShape& shape, int64_t max_token_bytes,
                                            int64_t max_response_bytes) {
  const int64_t estimate = estimate_response_bytes(shape, max_token_bytes);
  if (estimate <= max_response_bytes) return std::nullopt;
  return invalid_field(
      "max_tokens",
      fmt::format("The response could reach {} bytes ({} choice(s) = prompts x n, max_tokens {}, logprobs {}{}), "
                  "more than this server's bound of {} bytes (--max-response-bytes). Reduce max_tokens, n or "
                  "logprobs, or stream the response.",
                  estimate, shape.num_choices, shape.max_tokens, shape.logprobs < 0 ? 0 : shape.logprobs,
                  shape.echo_bytes > 0 ? ", echo" : "", max_response_bytes));
}

}  // namespace pagoda::openai
