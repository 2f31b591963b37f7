#include "engine/eagle_head.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/float_elements.h"

namespace pagoda {
namespace {

Error head_error(const EagleHeadTarget& target, const std::string& what) {
  return make_error(
      ErrorCode::kInvalidArgument,
      fmt::format("--speculative-config: EAGLE head for target '{}': {}", target.name, what));
}

// The name under which `name` (or "model." + name) is stored, checked to
// have exactly `shape`; "" when absent.
Result<std::string> find_tensor(WeightSource& weights, const EagleHeadTarget& target,
                                const std::string& name, const std::vector<int64_t>& shape) {
  std::string found = name;
  const TensorInfo* info = weights.find(found);
  if (info == nullptr) {
    found = "model." + name;
    info = weights.find(found);
  }
  if (info == nullptr) return std::string();
  if (info->shape != shape) {
    return head_error(target, fmt::format("tensor '{}' has shape [{}], expected [{}]", found,
                                          fmt::join(info->shape, ", "), fmt::join(shape, ", ")));
  }
  return found;
}

// The tensor `name` (or "model." + name) with exactly `shape`, as f32.
// `optional`: an absent tensor gives an empty vector.
Result<std::vector<float>> read_f32(WeightSource& weights, const EagleHeadTarget& target,
                                    const std::string& name, const std::vector<int64_t>& shape,
                                    bool optional = false) {
  PAGODA_ASSIGN_OR_RETURN(std::string found, find_tensor(weights, target, name, shape));
  if (found.empty()) {
    if (optional) return std::vector<float>();
    return head_error(target, fmt::format("tensor '{}' is missing ({})", name, weights.describe()));
  }
  if (!is_float_dtype(weights.find(found)->dtype)) {
    return head_error(target, fmt::format("tensor '{}' is not a float tensor", found));
  }
  PAGODA_ASSIGN_OR_RETURN(HostTensor t, weights.read(found));
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    out[static_cast<size_t>(i)] = load_float_element(t.dtype, t.data, i);
  }
  return out;
}

// The integer tensor `name` [n] (i64 or i32) as int64 values.
Result<std::vector<int64_t>> read_ints(WeightSource& weights, const EagleHeadTarget& target,
                                       const std::string& name, int64_t n) {
  PAGODA_ASSIGN_OR_RETURN(std::string found, find_tensor(weights, target, name, {n}));
  if (found.empty())
    return head_error(target, fmt::format("tensor '{}' is missing ({})", name, weights.describe()));
  const DType dtype = weights.find(found)->dtype;
  if (dtype != DType::kI64 && dtype != DType::kI32)
    return head_error(target, fmt::format("tensor '{}' is not an integer tensor", found));
  PAGODA_ASSIGN_OR_RETURN(HostTensor t, weights.read(found));
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kI64) {
      std::memcpy(&out[static_cast<size_t>(i)], static_cast<const char*>(t.data) + 8 * i, 8);
    } else {
      int32_t v = 0;
      std::memcpy(&v, static_cast<const char*>(t.data) + 4 * i, 4);
      out[static_cast<size_t>(i)] = v;
    }
  }
  return out;
}

// The checks every head shares: a one-layer Llama of the target's hidden size.
Status check_head_config(const ModelConfig& config, const EagleHeadTarget& target,
                         const char* kind) {
  if (config.architecture != "llama") {
    return head_error(target, fmt::format("its config.json is a '{}' ({}), not a Llama",
                                          config.architecture, config.hf_architecture));
  }
  if (config.num_layers != 1) {
    return head_error(target,
                      fmt::format("it has {} layers; {} heads have one", config.num_layers, kind));
  }
  if (config.hidden_size != target.hidden_size) {
    return head_error(target, fmt::format("its hidden size is {}, the target's {}",
                                          config.hidden_size, target.hidden_size));
  }
  return {};
}

}  // namespace

Result<EagleHead> load_eagle_head(const ModelConfig& config, WeightSource& weights,
                                  const EagleHeadTarget& target) {
  PAGODA_RETURN_IF_ERROR(check_head_config(config, target, "EAGLE-1"));
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

std::vector<int64_t> eagle3_default_aux_layers(int64_t num_target_layers) {
  return {2, num_target_layers / 2, num_target_layers - 3};
}

Result<Eagle3Fields> parse_eagle3_fields(const std::string& config_json,
                                         const EagleHeadTarget& target) {
  const nlohmann::json j = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return head_error(target, "its config.json is not a JSON object");
  Eagle3Fields f;
  f.draft_vocab_size = target.vocab_size;
  if (const auto it = j.find("draft_vocab_size"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer())
      return head_error(target, "config.json draft_vocab_size is not an integer");
    f.draft_vocab_size = it->get<int64_t>();
  }
  if (f.draft_vocab_size < 1 || f.draft_vocab_size > target.vocab_size)
    return head_error(target, fmt::format("config.json draft_vocab_size {} is outside [1, {}] (the "
                                          "target's vocabulary)",
                                          f.draft_vocab_size, target.vocab_size));
  f.aux_layer_ids = eagle3_default_aux_layers(target.num_layers);
  const auto ec = j.find("eagle_config");
  if (ec != j.end() && !ec->is_null() && !ec->is_object())
    return head_error(target, "config.json eagle_config is not an object");
  if (ec != j.end() && ec->is_object()) {
    const auto ids = ec->find("eagle_aux_hidden_state_layer_ids");
    if (ids != ec->end() && !ids->is_null()) {
      if (!ids->is_array() || !std::all_of(ids->begin(), ids->end(),
                                           [](const auto& x) { return x.is_number_integer(); }))
        return head_error(target,
                          "config.json eagle_config.eagle_aux_hidden_state_layer_ids is not "
                          "a list of integers");
      f.aux_layer_ids = ids->get<std::vector<int64_t>>();
    }
  }
  std::vector<int64_t> sorted = f.aux_layer_ids;
  std::sort(sorted.begin(), sorted.end());
  const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  if (sorted.size() != 3 || !distinct || sorted.front() < 0 || sorted.back() > target.num_layers)
    return head_error(target, fmt::format("its aux hidden-state layers [{}] are not three distinct "
                                          "ids in [0, {}] (eagle_config."
                                          "eagle_aux_hidden_state_layer_ids, default 2, L/2, L-3)",
                                          fmt::join(f.aux_layer_ids, ", "), target.num_layers));
  return f;
}

Result<Eagle3Head> load_eagle3_head(const ModelConfig& config, const Eagle3Fields& fields,
                                    WeightSource& weights, const EagleHeadTarget& target) {
  PAGODA_RETURN_IF_ERROR(check_head_config(config, target, "EAGLE-3"));
  const int64_t h = config.hidden_size;
  const int64_t q = config.num_heads * config.head_dim;
  const int64_t kv = config.num_kv_heads * config.head_dim;
  const int64_t inter = config.intermediate_size;
  const int64_t vd = fields.draft_vocab_size;
  const std::string l = "midlayer.";
  Eagle3Head head;
  head.config = config;
  head.fields = fields;
  auto read = [&](std::vector<float>* out, const std::string& name, std::vector<int64_t> shape,
                  bool optional = false) -> Status {
    PAGODA_ASSIGN_OR_RETURN(*out, read_f32(weights, target, name, shape, optional));
    return {};
  };
  PAGODA_RETURN_IF_ERROR(read(&head.fc, "fc.weight", {h, 3 * h}));
  PAGODA_RETURN_IF_ERROR(read(&head.input_norm, l + "input_layernorm.weight", {h}));
  PAGODA_RETURN_IF_ERROR(read(&head.hidden_norm, l + "hidden_norm.weight", {h}));
  PAGODA_RETURN_IF_ERROR(read(&head.q_proj, l + "self_attn.q_proj.weight", {q, 2 * h}));
  PAGODA_RETURN_IF_ERROR(read(&head.k_proj, l + "self_attn.k_proj.weight", {kv, 2 * h}));
  PAGODA_RETURN_IF_ERROR(read(&head.v_proj, l + "self_attn.v_proj.weight", {kv, 2 * h}));
  PAGODA_RETURN_IF_ERROR(read(&head.o_proj, l + "self_attn.o_proj.weight", {h, q}));
  PAGODA_RETURN_IF_ERROR(read(&head.post_attn_norm, l + "post_attention_layernorm.weight", {h}));
  PAGODA_RETURN_IF_ERROR(read(&head.gate_proj, l + "mlp.gate_proj.weight", {inter, h}));
  PAGODA_RETURN_IF_ERROR(read(&head.up_proj, l + "mlp.up_proj.weight", {inter, h}));
  PAGODA_RETURN_IF_ERROR(read(&head.down_proj, l + "mlp.down_proj.weight", {h, inter}));
  PAGODA_RETURN_IF_ERROR(read(&head.norm, "norm.weight", {h}));
  PAGODA_RETURN_IF_ERROR(read(&head.lm_head, "lm_head.weight", {vd, h}));
  PAGODA_RETURN_IF_ERROR(
      read(&head.embed_tokens, "embed_tokens.weight", {target.vocab_size, h}, true));
  PAGODA_ASSIGN_OR_RETURN(std::vector<int64_t> d2t, read_ints(weights, target, "d2t", vd));
  head.draft_to_target.resize(static_cast<size_t>(vd));
  for (int64_t d = 0; d < vd; ++d) {
    const int64_t t = d + d2t[static_cast<size_t>(d)];
    if (t < 0 || t >= target.vocab_size)
      return head_error(target,
                        fmt::format("d2t[{}] = {} maps draft token {} to {}, outside the "
                                    "target's vocabulary [0, {})",
                                    d, d2t[static_cast<size_t>(d)], d, t, target.vocab_size));
    head.draft_to_target[static_cast<size_t>(d)] = static_cast<int32_t>(t);
  }
  return head;
}

}  // namespace pagoda
