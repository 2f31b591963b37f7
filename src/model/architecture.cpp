#include "model/architecture.h"

#include <fmt/format.h>

#include <array>

namespace pagoda {
namespace {

Error bad_field(const ModelConfig& c, const std::string& field, const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument,
                    "model config (" + c.architecture + "): " + field + " " + what);
}

const std::array<const Architecture* (*)(), 4> kFamilies = {
    [] { return &llama_architecture(); }, [] { return &mistral_architecture(); },
    [] { return &qwen2_architecture(); }, [] { return &qwen3_architecture(); }};

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

Result<const Architecture*> find_architecture(const ModelConfig& config) {
  std::string supported;
  for (auto family : kFamilies) {
    const Architecture* a = family();
    if (config.architecture == a->name) {
      PAGODA_RETURN_IF_ERROR(validate_decoder_config(config));
      PAGODA_RETURN_IF_ERROR(a->validate(config));
      return a;
    }
    supported += std::string(supported.empty() ? "" : ", ") + a->name;
  }
  return make_error(ErrorCode::kUnsupported, "model architecture \"" + config.architecture +
                                                 "\" is not supported (supported: " + supported +
                                                 ")");
}

}  // namespace pagoda
