// Creates the engine's Runner for --tensor-parallel-size N and
// --pipeline-parallel-size M: one ModelRunner on one backend (N = M = 1, no
// threads), or a ParallelRunner over N x M backends and communicators, each
// rank's ModelRunner holding its shard of its stage's layers.
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
  // The linear layers' precision (ModelInfo::weight_precision).
  std::string weight_precision;
  // "" for N = M = 1, else e.g. "tensor parallel 2 (nccl 2.28.9)", "tensor
  // parallel 4 (cpu threads)", "pipeline parallel 2 (layers 0-2 | 3-4) (cpu
  // threads)", "tensor parallel 2 x pipeline parallel 2 (layers ...) (...)".
  std::string parallelism;
  // What one KV block's bytes are counted over: "" for N = M = 1, else "per
  // GPU" or "per rank" (cpu); with M > 1 the fullest GPU's (the stages with
  // most layers).
  std::string kv_scope;
};

// Checks options.tensor_parallel_size against the model (heads, kv heads and
// intermediate size must split: model/tensor_parallel.h) and
// options.pipeline_parallel_size (at most the layers:
// model/pipeline_parallel.h) before anything is created, creates the N x M
// backends (backend_factory.h; rank s * N + t is tensor-parallel rank t of
// stage s) and the communicators (a tp group per stage, a pp group per tp
// rank; cpu: threads of this process; cuda: NCCL), logs the
// "backend: ..." line, then loads the weights: every rank concurrently, on
// its own thread.
Result<LoadedRunner> load_runner(const EngineOptions& options, const ModelConfig& config,
                                 WeightSource& weights, const RunnerOptions& runner_options);

}  // namespace pagoda
