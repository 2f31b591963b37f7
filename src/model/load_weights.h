// Loads a model family's tensors onto a backend as one ModelWeights.
#pragma once

#include "backend/backend.h"
#include "core/result.h"
#include "io/model_config.h"
#include "io/weight_source.h"
#include "model/architecture.h"
#include "model/weights.h"

namespace pagoda {

// Reads every tensor `arch` names for `config`, checks its shape, fuses q/k/v
// (and their biases) and gate/up, converts to backend.compute_dtype() and
// uploads. lm_head shares the embedding when config.tie_word_embeddings or
// when the file has no lm_head. Errors name the tensor.
Result<ModelWeights> load_model_weights(const Architecture& arch, const ModelConfig& config,
                                        Backend& backend, WeightSource& source);

}  // namespace pagoda
