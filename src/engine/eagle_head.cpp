#include "engine/eagle_head.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/float_elements.h"

namespace pagoda {
namespace {

Error head_error(const EagleHeadTarget& target, const std::string& what) {
  return make_error(
      ErrorCode::kInvalidArgument,
      fmt::format("--speculative-config: EAGLE head for target '{}': {}", target.name, what));
}

// The tensor `name` (or "model." + name) with exactly `shape`, as f32.
// `optional`: an absent tensor gives an empty vector.
Result<std::vector<float>> read_f32(WeightSource& weights, const EagleHeadTarget& target,
                                    const std::string& name, const std::vector<int64_t>& shape,
                                    bool optional = false) {
  std::string found = name;
  const TensorInfo* info = weights.find(found);
  if (info == nullptr) {
    found = "model." + name;
    info = weights.find(found);
  }
  if (info == nullptr) {
    if (optional) return std::vector<float>();
    return head_error(target, fmt::format("tensor '{}' is missing ({})", name, weights.describe()));
  }
  if (info->shape != shape) {
    return head_error(target, fmt::format("tensor '{}' has shape [{}], expected [{}]", found,
                                          fmt::join(info->shape, ", "), fmt::join(shape, ", ")));
  }
  if (!is_float_dtype(info->dtype)) {
    return head_error(target, fmt::format("tensor '{}' is not a float tensor", found));
  }
  PAGODA_ASSIGN_OR_RETURN(HostTensor t, weights.read(found));
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    out[static_cast<size_t>(i)] = load_float_element(t.dtype, t.data, i);
  }
  return out;
}

}  // namespace

Result<EagleHead> load_eagle_head(const ModelConfig& config, WeightSource& weights,
                                  const EagleHeadTarget& target) {
  if (config.architecture != "llama") {
    return head_error(target, fmt::format("its config.json is a '{}' ({}), not a Llama",
                                          config.architecture, config.hf_architecture));
  }
  if (config.num_layers != 1) {
    return head_error(target,
                      fmt::format("it has {} layers; EAGLE-1 heads have one", config.num_layers));
  }
  if (config.hidden_size != target.hidden_size) {
    return head_error(target, fmt::format("its hidden size is {}, the target's {}",
                                          config.hidden_size, target.hidden_size));
  }
  if (config.vocab_size != target.vocab_size) {
    return head_error(target, fmt::format("its vocabulary has {} tokens, the target's {}",
                                          config.vocab_size, target.vocab_size));
  }
  const int64_t h = config.hidden_size;
  const int64_t q = config.num_heads * config.head_dim;
  const int64_t kv = config.num_kv_heads * config.head_dim;
  const int64_t inter = config.intermediate_size;
  const std::string l = "layers.0.";
  EagleHead head;
  head.config = config;
  PAGODA_ASSIGN_OR_RETURN(head.fc, read_f32(weights, target, "fc.weight", {h, 2 * h}));
  PAGODA_ASSIGN_OR_RETURN(head.fc_bias, read_f32(weights, target, "fc.bias", {h}, true));
  PAGODA_ASSIGN_OR_RETURN(head.q_proj,
                          read_f32(weights, target, l + "self_attn.q_proj.weight", {q, h}));
  PAGODA_ASSIGN_OR_RETURN(head.k_proj,
                          read_f32(weights, target, l + "self_attn.k_proj.weight", {kv, h}));
  PAGODA_ASSIGN_OR_RETURN(head.v_proj,
                          read_f32(weights, target, l + "self_attn.v_proj.weight", {kv, h}));
  PAGODA_ASSIGN_OR_RETURN(head.o_proj,
                          read_f32(weights, target, l + "self_attn.o_proj.weight", {h, q}));
  PAGODA_ASSIGN_OR_RETURN(head.post_attn_norm,
                          read_f32(weights, target, l + "post_attention_layernorm.weight", {h}));
  PAGODA_ASSIGN_OR_RETURN(head.gate_proj,
                          read_f32(weights, target, l + "mlp.gate_proj.weight", {inter, h}));
  PAGODA_ASSIGN_OR_RETURN(head.up_proj,
                          read_f32(weights, target, l + "mlp.up_proj.weight", {inter, h}));
  PAGODA_ASSIGN_OR_RETURN(head.down_proj,
                          read_f32(weights, target, l + "mlp.down_proj.weight", {h, inter}));
  PAGODA_ASSIGN_OR_RETURN(head.embed_tokens, read_f32(weights, target, "embed_tokens.weight",
                                                      {config.vocab_size, h}, true));
  return head;
}

}  // namespace pagoda
