#include "model/kv_scales.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>

#include "core/half.h"

namespace pagoda {

namespace {

// The one value of a scale tensor, which must be positive and finite.
Result<float> read_scale(WeightSource& weights, const std::string& name) {
  PAGODA_ASSIGN_OR_RETURN(HostTensor t, weights.read(name));
  if (t.numel() != 1 || t.shape.size() > 1)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("tensor {}: a KV-cache scale must be one value (shape [] or "
                                  "[1]; per-head scales are not supported), found {} elements",
                                  name, t.numel()));
  float v = 0.0f;
  uint16_t h = 0;
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(&v, t.data, sizeof(v));
      break;
    case DType::kBF16:
      std::memcpy(&h, t.data, sizeof(h));
      v = bf16_to_float(h);
      break;
    case DType::kF16:
      std::memcpy(&h, t.data, sizeof(h));
      v = fp16_to_float(h);
      break;
    default:
      return make_error(
          ErrorCode::kInvalidArgument,
          fmt::format("tensor {}: a KV-cache scale must be f32, bf16 or f16, found {}", name,
                      dtype_name(t.dtype)));
  }
  if (!(std::isfinite(v) && v > 0.0f))
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("tensor {}: a KV-cache scale must be positive and finite, found {}", name, v));
  return v;
}

// The first of `names` the checkpoint has, or nullopt.
std::optional<std::string> first_present(const WeightSource& weights,
                                         std::initializer_list<std::string> names) {
  for (const std::string& n : names)
    if (weights.find(n) != nullptr) return n;
  return std::nullopt;
}

}  // namespace

std::vector<std::string> attention_prefixes(const WeightSource& weights, int64_t first,
                                            int64_t count) {
  std::vector<std::string> out;
  for (int64_t l = first; l < first + count; ++l)
    out.push_back("model.layers." + std::to_string(l) + ".self_attn.");
  const std::string_view tail = ".self_attn.o_proj.weight";
  for (const TensorInfo& t : weights.tensors()) {
    const std::string_view name = t.name;
    const size_t at = name.rfind("layers.");
    if (at == std::string_view::npos || !name.ends_with(tail)) continue;
    const std::string_view number = name.substr(at + 7, name.size() - tail.size() - at - 7);
    int64_t l = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), l);
    if (ec != std::errc() || end != number.data() + number.size()) continue;
    if (l >= first && l < first + count)
      out[static_cast<size_t>(l - first)] =
          std::string(name.substr(0, name.size() - std::string_view("o_proj.weight").size()));
  }
  return out;
}

Result<LoadedKvScales> load_kv_scales(WeightSource& weights,
                                      const std::vector<std::string>& attention_prefix) {
  LoadedKvScales out;
  out.scales.resize(attention_prefix.size());
  size_t num_found = 0;
  for (size_t l = 0; l < attention_prefix.size(); ++l) {
    const std::string& p = attention_prefix[l];
    const std::optional<std::string> kv = first_present(weights, {p + "kv_scale"});
    std::optional<std::string> k = first_present(weights, {p + "k_scale", p + "k_proj.k_scale"});
    std::optional<std::string> v = first_present(weights, {p + "v_scale", p + "v_proj.v_scale"});
    if (!k && !v && kv) k = v = kv;
    if (!k && !v) continue;
    if (!k || !v)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("the checkpoint has {} but no {} scale for layer {}",
                                    k ? *k : *v, k ? "v" : "k", p));
    PAGODA_ASSIGN_OR_RETURN(out.scales[l].k, read_scale(weights, *k));
    PAGODA_ASSIGN_OR_RETURN(out.scales[l].v, read_scale(weights, *v));
    ++num_found;
  }
  if (num_found != 0 && num_found != attention_prefix.size()) {
    for (size_t l = 0; l < attention_prefix.size(); ++l) {
      const std::string& p = attention_prefix[l];
      if (!first_present(weights, {p + "k_scale", p + "k_proj.k_scale", p + "kv_scale"}))
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("the checkpoint has KV-cache scales for {} of {} layers but "
                                      "none for {} (expected {}k_scale and {}v_scale)",
                                      num_found, attention_prefix.size(), p, p, p));
    }
  }
  out.source = num_found > 0 ? fmt::format("read from the checkpoint ({} layers)", num_found)
                             : "1.0: the checkpoint has none (vLLM's default)";
  return out;
}

}  // namespace pagoda
