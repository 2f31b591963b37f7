#include "openai/prompt_truncation.h"

#include <fmt/format.h>

namespace pagoda::openai {

PromptTruncation read_prompt_truncation(FieldReader& reader) {
  PromptTruncation out;
  out.num_tokens = reader.integer("truncate_prompt_tokens", -1, INT64_MAX);
  if (out.num_tokens == 0) {
    reader.fail_field("truncate_prompt_tokens",
                      "must be -1 (the longest prompt the context allows) or at least 1, got 0");
  }
  if (auto side = reader.string("truncation_side")) {
    if (*side != "left" && *side != "right") {
      reader.fail_field("truncation_side",
                        fmt::format("must be \"left\" or \"right\", got \"{}\"", *side));
    } else if (!out.active()) {
      reader.fail_field("truncation_side", "needs 'truncate_prompt_tokens'");
    }
    out.keep_first = *side == "right";
  }
  return out;
}

ApiResult<int64_t> truncation_length(const PromptTruncation& truncation, int64_t max_model_len,
                                     int64_t max_output_tokens, const char* max_output_param) {
  const int64_t max_input = max_model_len - max_output_tokens;
  const int64_t requested = *truncation.num_tokens;
  if (requested == -1 && max_input < 1) {
    return invalid_field(
        "truncate_prompt_tokens",
        fmt::format("'truncate_prompt_tokens' = -1 keeps max_model_len - {} = {} - {} = {} tokens; "
                    "at least 1 is needed. Please request fewer output tokens.",
                    max_output_param, max_model_len, max_output_tokens, max_input));
  }
  if (requested > max_input) {
    return invalid_field(
        "truncate_prompt_tokens",
        fmt::format("'truncate_prompt_tokens' = {} cannot be greater than max_model_len - {} = "
                    "{} - {} = {}. Please request a smaller truncation size.",
                    requested, max_output_param, max_model_len, max_output_tokens, max_input));
  }
  const int64_t keep = requested == -1 ? max_input : requested;
  return keep;
}

bool truncate_prompt(const PromptTruncation& truncation, int64_t keep, std::vector<int32_t>& ids) {
  if (static_cast<int64_t>(ids.size()) <= keep) return false;
  if (truncation.keep_first) {
    ids.resize(static_cast<size_t>(keep));
  } else {
    ids.erase(ids.begin(), ids.end() - keep);
  }
  return true;
}

}  // namespace pagoda::openai
