// Rotary position embedding tables, computed like Hugging Face transformers'
// modeling_rope_utils (default, linear, llama3, yarn, longrope) including its f32
// rounding: inv_freq in f32, angle = f32(p) * inv_freq in f32, then
// cos/sin of that angle times the attention factor, rounded to f32. R below
// is config.rope_dim(): head_dim, or the leading dims a partial rotary
// embedding turns (Phi-4-mini: 96 of 128); the tables cover only those.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "io/model_config.h"

namespace pagoda {

struct RopeFrequencies {
  std::vector<float> inv_freq;    // [R/2]
  float attention_factor = 1.0f;  // multiplies cos and sin (yarn); 1 otherwise
};

// The config's rope_scaling, then config.rope_freq_factors (GGUF
// rope_freqs.weight) as divisors of inv_freq. Errors name the bad field
// (factor <= 0, odd head_dim or rotary_dim, missing
// original_max_position_embeddings, a factor list not of R / 2 values, ...).
//
// longrope's table is static, chosen by `max_model_len` (<= 0: the config's
// max_position_embeddings), as vLLM and llama.cpp choose it: the long
// factors for every position when max_model_len >
// original_max_position_embeddings, else the short ones (docs/models.md).
// Transformers picks per forward (long once the sequence passes the original
// length, recomputing its cache then), which equals this whenever
// max_model_len <= original_max_position_embeddings and, above it, for every
// sequence longer than the original length.
Result<RopeFrequencies> rope_frequencies(const ModelConfig& config, int64_t max_model_len = 0);

// longrope's multiplier of cos and sin: rope_scaling.attention_factor when
// given, else sqrt(1 + ln(s) / ln(original_max_position_embeddings)) with
// s = rope_scaling.factor (1 when s <= 1), as transformers computes it; the
// parsers set factor to max_position_embeddings / original.
double longrope_attention_factor(const ModelConfig& config);

// The frequencies of the sliding-window layers of a config with
// rope_local_base_freq > 0 (Gemma 3): that base, no scaling.
Result<RopeFrequencies> local_rope_frequencies(const ModelConfig& config);

// The backend's cos_sin table [num_positions, R] f32: row p holds
// cos(p * inv_freq[i]) * a for i < R/2, then sin(p * inv_freq[i]) * a.
std::vector<float> rope_cos_sin_table(const RopeFrequencies& freqs, int64_t num_positions);

// Row `position` of that table into row[0, R).
void rope_cos_sin_row(const RopeFrequencies& freqs, int64_t position, float* row);

}  // namespace pagoda
