// The FP8 KV cache's per-layer k/v scales (core/kv_cache_dtype.h: stores
// e4m3(x / scale), reads e4m3 * scale), read from a checkpoint.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "io/weight_source.h"

namespace pagoda {

// One layer's FP8 scales.
struct KvScales {
  float k = 1.0f;
  float v = 1.0f;
};

// The k/v scales of `layers` attention layers whose tensors are named under
// `attention_prefix[l]` (e.g. "model.layers.3.self_attn."), as vLLM reads
// them: "<prefix>k_scale" / "v_scale" (compressed-tensors kv_cache_scheme),
// "<prefix>k_proj.k_scale" / "v_proj.v_scale" (NVIDIA ModelOpt), or the
// older single "<prefix>kv_scale" for both. Each must hold one positive
// finite value (shape [] or [1]); a layer without any keeps 1.0. `source`
// says which, for the start-up log: "read from the checkpoint (N layers)"
// or "1.0: the checkpoint has none (vLLM's default)".
// Errors: a scale tensor that is not one positive finite value, or scales
// for some layers only (both name the tensor or layer).
// The attention module path of layers [first, first + count) in `weights`:
// "<base>layers.N.self_attn." of the tensor "<base>layers.N.self_attn.o_proj.weight"
// whatever its base ("model.", "language_model.model.", ...);
// "model.layers.N.self_attn." for a layer without one (random weights).
std::vector<std::string> attention_prefixes(const WeightSource& weights, int64_t first,
                                            int64_t count);

struct LoadedKvScales {
  std::vector<KvScales> scales;  // [layers]
  std::string source;
};
Result<LoadedKvScales> load_kv_scales(WeightSource& weights,
                                      const std::vector<std::string>& attention_prefix);

}  // namespace pagoda
