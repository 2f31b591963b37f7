// Rotary position embedding tables, computed like Hugging Face transformers'
// modeling_rope_utils (default, linear, llama3, yarn) including its f32
// rounding: inv_freq in f32, angle = f32(p) * inv_freq in f32, then
// cos/sin of that angle times the attention factor, rounded to f32.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "io/model_config.h"

namespace pagoda {

struct RopeFrequencies {
  std::vector<float> inv_freq;    // [D/2]
  float attention_factor = 1.0f;  // multiplies cos and sin (yarn); 1 otherwise
};

// The config's rope_scaling, then config.rope_freq_factors (GGUF
// rope_freqs.weight) as divisors of inv_freq. Errors name the bad field
// (factor <= 0, odd head_dim, missing original_max_position_embeddings, a
// factor list of the wrong length, ...).
Result<RopeFrequencies> rope_frequencies(const ModelConfig& config);

// The frequencies of the sliding-window layers of a config with
// rope_local_base_freq > 0 (Gemma 3): that base, no scaling.
Result<RopeFrequencies> local_rope_frequencies(const ModelConfig& config);

// The backend's cos_sin table [num_positions, D] f32: row p holds
// cos(p * inv_freq[i]) * a for i < D/2, then sin(p * inv_freq[i]) * a.
std::vector<float> rope_cos_sin_table(const RopeFrequencies& freqs, int64_t num_positions);

// Row `position` of that table into row[0, D).
void rope_cos_sin_row(const RopeFrequencies& freqs, int64_t position, float* row);

}  // namespace pagoda
