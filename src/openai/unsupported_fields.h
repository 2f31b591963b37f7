// Request fields of vLLM's (or OpenAI's) API that pagoda knows but cannot
// honour yet. Each is refused with a 400 naming it when a request sets it to
// anything but its no-op value (absent, null, or the value that changes
// nothing), so that a client never gets a 200 that silently ignored it.
#pragma once

#include "openai/field_reader.h"

namespace pagoda::openai {

// Both generation endpoints: vLLM's older structural_tag field (structured
// output's own fields: structured_output_request.h), return_tokens_as_token_ids
// (unless false), spaces_between_special_tokens (unless true),
// logits_processors, prompt_embeds, cache_salt, kv_transfer_params and
// vllm_xargs. Errors are recorded in `reader`.
void refuse_unsupported_fields(FieldReader& reader);

// /v1/chat/completions only: echo (unless false) and chat_template (a
// per-request template, which vLLM also refuses unless started with
// --trust-request-chat-template; pagoda takes templates only at start-up).
void refuse_unsupported_chat_fields(FieldReader& reader);

}  // namespace pagoda::openai
