#include "openai/unsupported_fields.h"

#include <string>

namespace pagoda::openai {

namespace {

// Refuses field `name` when present, not null and not `noop` (a JSON value
// that changes nothing; null: any value is refused).
void refuse_unless(FieldReader& reader, const char* name, const Json& noop, const char* why) {
  const Json* value = reader.value(name);
  if (value == nullptr || (!noop.is_null() && *value == noop)) return;
  reader.fail_field(name, std::string("is not supported: ") + why);
}

}  // namespace

void refuse_unsupported_fields(FieldReader& reader) {
  refuse_unless(reader, "structural_tag", nullptr,
                "structural tags are not implemented; use response_format or structured_outputs");
  refuse_unless(reader, "return_tokens_as_token_ids", false,
                "logprobs name tokens by their text; send false or leave it out");
  refuse_unless(reader, "spaces_between_special_tokens", true,
                "special tokens are always joined as the tokenizer decodes them; send true or "
                "leave it out");
  refuse_unless(reader, "logits_processors", nullptr, "custom logits processors are not loaded");
  refuse_unless(reader, "prompt_embeds", nullptr, "prompts are text or token ids");
  refuse_unless(reader, "cache_salt", nullptr, "the prefix cache is shared by all requests");
  refuse_unless(reader, "kv_transfer_params", nullptr, "there is no KV transfer");
  refuse_unless(reader, "vllm_xargs", nullptr, "there are no custom extensions to pass them to");
}

void refuse_unsupported_chat_fields(FieldReader& reader) {
  refuse_unless(reader, "echo", false,
                "the chat endpoint does not echo; use /v1/completions with echo, or leave it out");
  refuse_unless(reader, "chat_template", nullptr,
                "the chat template is chosen at start-up (--chat-template); requests cannot "
                "replace it");
}

}  // namespace pagoda::openai
