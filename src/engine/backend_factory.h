// Chooses and creates the compute backend named by --device.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/result.h"
#include "io/model_config.h"

namespace pagoda {

// device: "cpu", "cuda" or "auto" (cuda when this build has it and a GPU is
// present, else cpu). CUDA computes in f16 for f16 models, else bf16.
Result<std::unique_ptr<Backend>> create_backend(const std::string& device, const ModelConfig& config);

}  // namespace pagoda
