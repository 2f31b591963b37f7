// Creates the engine's Runner for --tensor-parallel-size: one ModelRunner on
// one backend (N = 1, no threads), or a ParallelRunner over N backends and
// communicators, each rank's ModelRunner holding its shard of the model.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/result.h"
#include "engine/engine_api.h"
#include "io/model_config.h"
#include "io/weight_source.h"
#include "model/runner.h"
#include "model/runner_options.h"

namespace pagoda {

struct LoadedRunner {
  // N = 1: the runner's backend (it must outlive the runner). N > 1: null;
  // the ParallelRunner owns its ranks' backends and communicators.
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Runner> runner;
  std::string device;  // the backend's name (rank 0's), e.g. "cpu (2 threads)"
  // "" for N = 1, else e.g. "tensor parallel 2 (nccl 2.28.9)", "tensor
  // parallel 4 (cpu threads)".
  std::string parallelism;
  // What one KV block's bytes are counted over: "" for N = 1, else "per GPU"
  // or "per rank" (cpu).
  std::string kv_scope;
};

// Checks options.tensor_parallel_size against the model (heads, kv heads and
// intermediate size must split: model/tensor_parallel.h) before anything is
// created, creates the backends (backend_factory.h) and, for N > 1, the
// communicators (cpu: threads of this process; cuda: NCCL), logs the
// "backend: ..." line, then loads the weights: every rank concurrently, on
// its own thread.
Result<LoadedRunner> load_runner(const EngineOptions& options, const ModelConfig& config,
                                 WeightSource& weights, const RunnerOptions& runner_options);

}  // namespace pagoda
