// Opening a model: its description (io/model_description.h) and its weights.
#pragma once

#include <memory>

#include "core/result.h"
#include "io/model_description.h"
#include "io/model_location.h"
#include "io/weight_source.h"

namespace pagoda {

struct OpenedModel : ModelDescription {
  // kHuggingFace: safetensors (else pytorch_model.bin, io/torch_checkpoint.h) mmap views (AWQ / GPTQ modules as group-format
  // blocks, io/int_quant_source.h); kGguf: dequantized on read.
  std::unique_ptr<WeightSource> weights;
};

// describe_model(location), then opens the weights. Logs what was opened.
Result<OpenedModel> open_model(const ModelLocation& location);

}  // namespace pagoda
