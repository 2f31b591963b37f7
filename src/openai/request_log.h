// Per-request logging (--enable-log-requests, as vLLM's): one INFO line per
// engine request with its id, its prompt and prompt token ids (truncated to
// --max-log-len) and its sampling parameters. Off by default: prompts are the
// users' data.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sample/sampling_params.h"

namespace pagoda::openai {

struct RequestLogOptions {
  bool enabled = false;
  // Prompt characters (code points) and prompt token ids shown; nullopt: all.
  std::optional<int64_t> max_log_len;
};

// `request <id>: prompt: "<text>", prompt_token_ids: [..], params: {..}`:
// the prompt as a JSON string (one line whatever it holds; invalid UTF-8
// replaced), both cut to max_log_len with "..." after a cut, and the
// sampling fields that are set (sample/sampling_fields.h's names) as JSON.
std::string request_log_line(std::string_view request_id, std::string_view prompt,
                             std::span<const int32_t> prompt_token_ids,
                             const SamplingParams& params, std::optional<int64_t> max_log_len);

// Logs request_log_line at INFO when options.enabled.
void log_request(const RequestLogOptions& options, std::string_view request_id,
                 std::string_view prompt, std::span<const int32_t> prompt_token_ids,
                 const SamplingParams& params);

}  // namespace pagoda::openai
