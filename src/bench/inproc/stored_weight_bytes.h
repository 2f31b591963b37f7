// Bytes per weight of a model kept in quantization blocks on the device
// (GGUF Q4_0..Q6_K; AWQ / GPTQ modules repacked into the group formats), for
// the decode speed of light of `pagoda bench latency`.
#pragma once

#include <optional>
#include <vector>

#include <string>

#include "core/result.h"
#include "io/model_location.h"
#include "io/weight_source.h"

namespace pagoda::bench {

struct StoredWeightBytes {
  double matmul = 0.0;  // bytes per parameter of the layers' 2-D weights
  double head = 0.0;    // bytes per parameter of the lm_head (or the tied embedding)
};

// From a model's tensors as the weight source lists them: every 2-D tensor
// under "model.layers." counts its block bytes (dtype_nbytes of
// TensorInfo::blocks) when it has blocks, else `elem` per element (the
// compute dtype it is converted to); the head is "lm_head.weight", else the
// tied "model.embed_tokens.weight", likewise (a tied embedding in blocks is
// kept in blocks as the head, model/blocks.cpp). nullopt when no such tensor
// has blocks (nothing is kept quantized).
std::optional<StoredWeightBytes> stored_weight_bytes(const std::vector<TensorInfo>& tensors,
                                                     double elem);

// stored_weight_bytes of the tensors of the model at `location` as
// `load_format` opens it (engine/load_format.h's open_model_as): "auto" its
// files', "dummy" the dummy source's, whose AWQ / GPTQ linear weights are
// random group-format blocks of the checkpoint's formats (a dummy GGUF model
// is dense: nullopt). Errors: open_model_as's.
Result<std::optional<StoredWeightBytes>> stored_weight_bytes_of(const ModelLocation& location,
                                                                const std::string& load_format,
                                                                double elem);

}  // namespace pagoda::bench
