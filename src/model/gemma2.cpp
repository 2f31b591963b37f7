// Gemma 2 (Gemma2ForCausalLM, GGUF gemma2): the Gemma decoder
// (gemma_decoder.h) without q/k norms, with attention-logit and final-logit
// soft-capping, and sliding-window attention on every other layer (even
// layers slide); one rope base for all layers.
#include "model/architecture.h"
#include "model/gemma_decoder.h"

namespace pagoda {
namespace {

Status validate_gemma2(const ModelConfig& c) {
  PAGODA_RETURN_IF_ERROR(validate_gemma_config(c, "gemma2"));
  if (c.qk_norm)
    return make_error(ErrorCode::kInvalidArgument,
                      "model config (gemma2): Gemma 2 has no q/k norms");
  return {};
}

}  // namespace

const Architecture& gemma2_architecture() {
  static const Architecture a{"gemma2", validate_gemma2, load_gemma_decoder, gemma_forward,
                              gemma_causal_lm_layer_names};
  return a;
}

}  // namespace pagoda
