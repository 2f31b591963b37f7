// Gemma 3 text (Gemma3ForCausalLM, GGUF gemma3): the Gemma decoder
// (gemma_decoder.h) with per-head q/k RMSNorm (1 + w) before RoPE, five
// sliding-window layers to one global (sliding_window_pattern / layer_types),
// the sliding layers on their own rope base (rope_local_base_freq, unscaled)
// and the global ones on rope_theta with rope_scaling; soft-capping only
// when the config sets it.
#include "model/architecture.h"
#include "model/gemma_decoder.h"

namespace pagoda {
namespace {

Status validate_gemma3(const ModelConfig& c) {
  PAGODA_RETURN_IF_ERROR(validate_gemma_config(c, "gemma3"));
  if (!c.qk_norm)
    return make_error(ErrorCode::kInvalidArgument,
                      "model config (gemma3): q/k norms must be enabled");
  if (c.rope_local_base_freq <= 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "model config (gemma3): rope_local_base_freq must be positive");
  return {};
}

}  // namespace

const Architecture& gemma3_architecture() {
  static const Architecture a{"gemma3", validate_gemma3, load_gemma_decoder, gemma_forward,
                              gemma_causal_lm_layer_names};
  return a;
}

}  // namespace pagoda
