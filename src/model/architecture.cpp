// validate_decoder_config: the checks every family shares.
#include "model/architecture.h"

#include <fmt/format.h>

#include <string>
#include <utility>

namespace pagoda {
namespace {

Error bad_field(const ModelConfig& c, const std::string& field, const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument,
                    "model config (" + c.architecture + "): " + field + " " + what);
}

}  // namespace

Status validate_decoder_config(const ModelConfig& c) {
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings}};
  for (const auto& [field, value] : positive)
    if (value <= 0) return bad_field(c, field, "must be positive, found " + std::to_string(value));
  if (c.num_heads % c.num_kv_heads != 0)
    return bad_field(c, "num_attention_heads",
                     fmt::format("({}) must be a multiple of num_key_value_heads ({})", c.num_heads,
                                 c.num_kv_heads));
  if (c.head_dim % 2 != 0)
    return bad_field(c, "head_dim",
                     "must be even for rotary embeddings, found " + std::to_string(c.head_dim));
  if (!(c.rms_norm_eps > 0)) return bad_field(c, "rms_norm_eps", "must be positive");
  if (!(c.rope_theta > 0)) return bad_field(c, "rope_theta", "must be positive");
  return {};
}

}  // namespace pagoda
