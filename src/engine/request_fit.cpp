#include "engine/request_fit.h"

#include <fmt/format.h>

#include <algorithm>

#include "kv/sliding_window_blocks.h"

namespace pagoda {

Result<int64_t, RequestLimitError> fit_context(const ModelInfo& info, const RequestSize& request) {
  const int64_t num_prompt = request.num_prompt_tokens;
  const int64_t left = info.max_model_len - num_prompt;
  if (left <= 0 || (request.max_tokens && *request.max_tokens > left)) {
    const int64_t completion = request.max_tokens.value_or(0);
    return RequestLimitError{
        RequestLimit::kContextLength,
        fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                    "tokens ({} in the {}, {} in the completion). Please reduce the length of the "
                    "{} or completion.",
                    info.max_model_len, num_prompt + completion, num_prompt, request.prompt_name,
                    completion, request.prompt_name)};
  }
  if (request.max_tokens) return *request.max_tokens;
  return request.default_max_tokens ? std::min(*request.default_max_tokens, left) : left;
}

Result<int64_t, RequestLimitError> fit_request(const ModelInfo& info, const RequestSize& request) {
  Result<int64_t, RequestLimitError> max_tokens = fit_context(info, request);
  if (!max_tokens.ok()) return max_tokens;
  if (request.num_seqs > info.max_num_seqs) {
    return RequestLimitError{RequestLimit::kNumSeqs,
                             fmt::format("n/best_of/beam width {} exceeds --max-num-seqs {}",
                                         request.num_seqs, info.max_num_seqs)};
  }
  const int64_t num_tokens = request.num_prompt_tokens + max_tokens.value();
  const int64_t blocks = request.num_seqs * ((num_tokens + info.block_size - 1) / info.block_size);
  if (blocks > info.num_kv_blocks) {
    return RequestLimitError{
        RequestLimit::kKvBlocks,
        fmt::format("{} sequence(s) of up to {} tokens ({} prompt + {} max_tokens) need {} KV "
                    "blocks; the pool has {}. Reduce max_tokens, n or best_of, or raise "
                    "--num-kv-blocks.",
                    request.num_seqs, num_tokens, request.num_prompt_tokens, max_tokens.value(),
                    blocks, info.num_kv_blocks)};
  }
  if (info.num_sliding_kv_blocks > 0) {
    const int64_t window_blocks =
        request.num_seqs * sliding_window_blocks(info.sliding_window, info.block_size, num_tokens,
                                                 info.max_num_batched_tokens);
    if (window_blocks > info.num_sliding_kv_blocks) {
      return RequestLimitError{
          RequestLimit::kKvBlocks,
          fmt::format("{} sequence(s) of up to {} tokens need {} sliding-window KV blocks (window "
                      "{} behind steps of up to {} tokens); the sliding-window pool has {}. "
                      "Reduce n or best_of, or raise --num-kv-blocks.",
                      request.num_seqs, num_tokens, window_blocks, info.sliding_window,
                      info.max_num_batched_tokens, info.num_sliding_kv_blocks)};
    }
  }
  return max_tokens;
}

}  // namespace pagoda
