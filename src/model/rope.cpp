#include "model/rope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

namespace pagoda {
namespace {

Error bad(const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument, "rope_scaling: " + what);
}

// "head_dim" or, with a partial rotary embedding, "rotary_dim": the
// dims the frequencies cover, for errors.
std::string rotary_dims_name(const ModelConfig& c) {
  return c.rope_dim() == c.head_dim ? "head_dim" : "rotary_dim";
}

// transformers: base ** (arange(0, dim, 2).float() / dim), all in f32, with
// dim = the rotary dims (int(head_dim * partial_rotary_factor)).
std::vector<float> base_powers(double base, int64_t dim) {
  std::vector<float> out(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    out[static_cast<size_t>(i)] = std::pow(static_cast<float>(base), e);
  }
  return out;
}

std::vector<float> default_inv_freq(double base, int64_t dim) {
  std::vector<float> inv = base_powers(base, dim);
  for (float& x : inv) x = 1.0f / x;
  return inv;
}

// _compute_llama3_parameters.
std::vector<float> llama3_inv_freq(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const float factor = static_cast<float>(s.factor);
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const float low_wavelen = static_cast<float>(old_len / s.low_freq_factor);
  const float high_wavelen = static_cast<float>(old_len / s.high_freq_factor);
  std::vector<float> inv = default_inv_freq(c.rope_theta, c.rope_dim());
  for (float& f : inv) {
    const float wavelen = static_cast<float>(2.0 * std::numbers::pi) / f;
    const float scaled = wavelen > low_wavelen ? f / factor : f;
    const float smooth =
        (static_cast<float>(old_len) / wavelen - static_cast<float>(s.low_freq_factor)) /
        static_cast<float>(s.high_freq_factor - s.low_freq_factor);
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? smoothed : scaled;
  }
  return inv;
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// _compute_yarn_parameters (truncate = true, the transformers default).
RopeFrequencies yarn_frequencies(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const int64_t dim = c.rope_dim();
  const double base = c.rope_theta;
  const double orig = static_cast<double>(s.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(orig / (rotations * 2.0 * std::numbers::pi))) /
           (2.0 * std::log(base));
  };
  const double beta_fast = s.beta_fast != 0.0 ? s.beta_fast : 32.0;
  const double beta_slow = s.beta_slow != 0.0 ? s.beta_slow : 1.0;
  const double low = std::max(std::floor(correction_dim(beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(beta_slow)), static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // as transformers: avoid a zero-width ramp

  const std::vector<float> pos = base_powers(base, dim);
  RopeFrequencies out;
  out.inv_freq.resize(pos.size());
  for (size_t i = 0; i < pos.size(); ++i) {
    const float extrapolation = 1.0f / pos[i];
    const float interpolation = 1.0f / (static_cast<float>(s.factor) * pos[i]);
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f,
        1.0f);
    const float extra_factor = 1.0f - ramp;
    out.inv_freq[i] = interpolation * (1.0f - extra_factor) + extrapolation * extra_factor;
  }
  double attention = 0.0;
  if (s.attention_factor.has_value()) {
    attention = *s.attention_factor;
  } else if (s.mscale != 0.0 && s.mscale_all_dim != 0.0) {
    attention = yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
  } else {
    attention = yarn_mscale(s.factor, 1.0);
  }
  out.attention_factor = static_cast<float>(attention);
  return out;
}

// _compute_longrope_parameters: inv_freq = 1 / (factor_i * base^(2i/D)) in
// f32 with the long factors when max_model_len exceeds the original context
// (vLLM's and llama.cpp's rule), else the short ones.
RopeFrequencies longrope_frequencies(const ModelConfig& c, int64_t max_model_len) {
  const RopeScaling& s = c.rope_scaling;
  const std::vector<float>& ext =
      max_model_len > s.original_max_position_embeddings ? s.long_factor : s.short_factor;
  const std::vector<float> pos = base_powers(c.rope_theta, c.rope_dim());
  RopeFrequencies out;
  out.inv_freq.resize(pos.size());
  for (size_t i = 0; i < pos.size(); ++i) out.inv_freq[i] = 1.0f / (ext[i] * pos[i]);
  out.attention_factor = static_cast<float>(longrope_attention_factor(c));
  return out;
}

Status validate_longrope(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  if (s.original_max_position_embeddings <= 0)
    return bad("longrope needs original_max_position_embeddings");
  for (const auto& [field, list] :
       {std::pair<const char*, const std::vector<float>*>{"short_factor", &s.short_factor},
        {"long_factor", &s.long_factor}}) {
    if (static_cast<int64_t>(list->size()) != c.rope_dim() / 2)
      return bad(fmt::format("longrope {} has {} values, expected {} / 2 = {}", field,
                             list->size(), rotary_dims_name(c), c.rope_dim() / 2));
    for (float x : *list)
      if (!(x > 0.0f) || !std::isfinite(x))
        return bad(
            fmt::format("longrope {} values must be positive and finite, found {}", field, x));
  }
  if (s.attention_factor.has_value() && !(*s.attention_factor > 0))
    return bad("longrope attention_factor must be positive");
  return {};
}

Status validate(const ModelConfig& c) {
  if (c.head_dim <= 0 || c.head_dim % 2 != 0)
    return bad("head_dim must be positive and even, found " + std::to_string(c.head_dim));
  if (c.rotary_dim < 0 || c.rotary_dim % 2 != 0 || c.rotary_dim > c.head_dim)
    return bad(fmt::format("rotary_dim must be even and in [0, head_dim {}], found {}", c.head_dim,
                           c.rotary_dim));
  if (c.rope_theta <= 0) return bad("rope_theta must be positive");
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScalingType::kDefault) return {};
  if (s.type == RopeScalingType::kLongrope) return validate_longrope(c);
  if (!(s.factor > 0)) return bad("factor must be positive, found " + std::to_string(s.factor));
  if (s.type == RopeScalingType::kLlama3) {
    if (s.original_max_position_embeddings <= 0)
      return bad("llama3 needs original_max_position_embeddings");
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0))
      return bad("llama3 needs 0 < low_freq_factor < high_freq_factor");
  }
  if (s.type == RopeScalingType::kYarn && s.original_max_position_embeddings <= 0)
    return bad("yarn needs original_max_position_embeddings");
  return {};
}

Status validate_factors(const ModelConfig& c) {
  const std::vector<float>& f = c.rope_freq_factors;
  if (f.empty()) return {};
  if (static_cast<int64_t>(f.size()) != c.rope_dim() / 2)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("rope frequency factors (rope_freqs.weight): {} values, expected "
                                  "{} / 2 = {}",
                                  f.size(), rotary_dims_name(c), c.rope_dim() / 2));
  for (float x : f) {
    if (!(x > 0.0f) || !std::isfinite(x))
      return make_error(ErrorCode::kInvalidArgument,
                        "rope frequency factors (rope_freqs.weight): every value must be positive "
                        "and finite, found " + std::to_string(x));
  }
  return {};
}

Result<RopeFrequencies> scaled_frequencies(const ModelConfig& config, int64_t max_model_len) {
  switch (config.rope_scaling.type) {
    case RopeScalingType::kDefault:
      return RopeFrequencies{default_inv_freq(config.rope_theta, config.rope_dim()), 1.0f};
    case RopeScalingType::kLinear: {
      RopeFrequencies f{default_inv_freq(config.rope_theta, config.rope_dim()), 1.0f};
      for (float& x : f.inv_freq) x /= static_cast<float>(config.rope_scaling.factor);
      return f;
    }
    case RopeScalingType::kLlama3:
      return RopeFrequencies{llama3_inv_freq(config), 1.0f};
    case RopeScalingType::kYarn:
      return yarn_frequencies(config);
    case RopeScalingType::kLongrope:
      return longrope_frequencies(config, max_model_len);
  }
  return bad("unknown rope type");
}

}  // namespace

double longrope_attention_factor(const ModelConfig& config) {
  const RopeScaling& s = config.rope_scaling;
  if (s.attention_factor.has_value()) return *s.attention_factor;
  const double orig = static_cast<double>(s.original_max_position_embeddings);
  return s.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s.factor) / std::log(orig));
}

Result<RopeFrequencies> rope_frequencies(const ModelConfig& config, int64_t max_model_len) {
  PAGODA_RETURN_IF_ERROR(validate(config));
  PAGODA_RETURN_IF_ERROR(validate_factors(config));
  if (max_model_len <= 0) max_model_len = config.max_position_embeddings;
  PAGODA_ASSIGN_OR_RETURN(RopeFrequencies f, scaled_frequencies(config, max_model_len));
  // llama.cpp: theta_i / freq_factor_i (one f32 division).
  for (size_t i = 0; i < config.rope_freq_factors.size(); ++i) f.inv_freq[i] /= config.rope_freq_factors[i];
  return f;
}

Result<RopeFrequencies> local_rope_frequencies(const ModelConfig& config) {
  ModelConfig local = config;
  local.rope_theta = config.rope_local_base_freq;
  local.rope_scaling = RopeScaling{};
  local.rope_freq_factors.clear();
  return rope_frequencies(local);
}

void rope_cos_sin_row(const RopeFrequencies& freqs, int64_t position, float* row) {
  const size_t half = freqs.inv_freq.size();
  for (size_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * freqs.inv_freq[i];
    row[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * freqs.attention_factor;
    row[half + i] =
        static_cast<float>(std::sin(static_cast<double>(angle))) * freqs.attention_factor;
  }
}

std::vector<float> rope_cos_sin_table(const RopeFrequencies& freqs, int64_t num_positions) {
  const int64_t d = 2 * static_cast<int64_t>(freqs.inv_freq.size());
  std::vector<float> table(static_cast<size_t>(num_positions * d));
  for (int64_t p = 0; p < num_positions; ++p) rope_cos_sin_row(freqs, p, table.data() + p * d);
  return table;
}

}  // namespace pagoda
