// Loads a model family's tensors onto a backend as one ModelWeights.
#pragma once

#include "backend/backend.h"
#include "core/result.h"
#include "io/model_config.h"
#include "io/weight_source.h"
#include "model/architecture.h"
#include "model/weights.h"

namespace pagoda {

// Runs arch.load with a WeightLoader over `source` (progress bar), then logs
// the tensors, bytes and seconds. Errors (from the family) name the tensor.
Result<ModelWeights> load_model_weights(const Architecture& arch, const ModelConfig& config,
                                        Backend& backend, WeightSource& source);

}  // namespace pagoda
