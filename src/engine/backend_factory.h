// Chooses and creates the compute backends named by --device and
// --tensor-parallel-size.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"
#include "io/model_config.h"

namespace pagoda {

// device: "cpu", "cuda" or "auto" (cuda when this build has it and a GPU is
// present, else cpu). CUDA computes in f16 for f16 models, else bf16.
Result<std::unique_ptr<Backend>> create_backend(const std::string& device, const ModelConfig& config);

// The backends of `count` (>= 1) ranks, rank r's at [r]: count = 1 is
// create_backend. `flags` names what asked for them in the error, e.g.
// "--tensor-parallel-size 4" or "--tensor-parallel-size 2 x
// --pipeline-parallel-size 2". cuda: one per GPU 0..count-1, checked before
// any is created ("--tensor-parallel-size 4 needs 4 GPUs, this machine has
// 2"; "auto" falls back to the cpu only when there is no GPU at all); each
// was made current on the calling thread in turn, so a thread that drives
// one must make it current first (CudaBackend::make_current). cpu: `count`
// CpuBackends sharing the process's thread pool.
Result<std::vector<std::unique_ptr<Backend>>> create_backends(const std::string& device,
                                                              const ModelConfig& config, int count,
                                                              const std::string& flags);

}  // namespace pagoda
