// Loads a model family's tensors onto a backend as one ModelWeights.
#pragma once

#include "backend/backend.h"
#include "core/result.h"
#include "io/model_config.h"
#include "io/weight_source.h"
#include "model/architecture.h"
#include "model/pipeline_parallel.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"

namespace pagoda {

// Runs arch.load with a WeightLoader over `source` (progress bar), then logs
// the tensors, bytes and seconds. Errors (from the family) name the tensor.
// `shard`: the tensor-parallel rank whose slices to load (tensor_parallel.h);
// `stage`: the pipeline stage whose layers (and globals) to load
// (pipeline_parallel.h). Only tensor-parallel rank 0 logs (one line per
// stage); only its stage 0 shows the progress bar. Ranks may load concurrently,
// each from its own source or all from one: WeightSource::read is safe to
// call from several threads (the sources only read their memory maps).
// `keep_blocks`: linear weights stored in quantization blocks stay in them
// (WeightLoader); config.quantization: FP8 linear weights (WeightLoader);
// the log line lists the device bytes of each weight dtype and the linear
// layers' precision.
Result<ModelWeights> load_model_weights(const Architecture& arch, const ModelConfig& config,
                                        Backend& backend, WeightSource& source, TpShard shard = {},
                                        PpStage stage = {}, bool keep_blocks = true);

}  // namespace pagoda
