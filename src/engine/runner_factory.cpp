#include "engine/runner_factory.h"

#include <fmt/format.h>

#include <vector>

#include "backend/communicator.h"
#include "core/log.h"
#include "engine/backend_factory.h"
#include "model/model_runner.h"
#include "model/parallel_runner.h"
#include "model/tensor_parallel.h"
#include "parallel/cpu_communicator.h"
#ifdef PAGODA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_communicator.h"
#endif

namespace pagoda {
namespace {

// The group's communicators, rank r's for backends[r].
Result<std::vector<std::unique_ptr<Communicator>>> create_communicators(
    const std::vector<std::unique_ptr<Backend>>& backends) {
#ifdef PAGODA_HAVE_CUDA
  if (backends[0]->kind() == DeviceKind::kCuda) {
    std::vector<CudaBackend*> cuda;
    for (const auto& b : backends) cuda.push_back(static_cast<CudaBackend*>(b.get()));
    return create_nccl_communicators(cuda);
  }
#endif
  return create_cpu_communicators(static_cast<int>(backends.size()));
}

// Runs on rank r's worker thread: the backend's device is made current there
// for every later call of that rank.
void bind_to_thread(Backend& backend) {
#ifdef PAGODA_HAVE_CUDA
  if (backend.kind() == DeviceKind::kCuda) static_cast<CudaBackend&>(backend).make_current();
#else
  (void)backend;
#endif
}

}  // namespace

Result<LoadedRunner> load_runner(const EngineOptions& options, const ModelConfig& config,
                                 WeightSource& weights, const RunnerOptions& runner_options) {
  const int n = options.tensor_parallel_size;
  PAGODA_RETURN_IF_ERROR(validate_tensor_parallel(config, n));
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Backend>> backends,
                          create_backends(options.device, config, n));
  LoadedRunner loaded;
  loaded.device = backends[0]->name();
  if (n == 1) {
    log_info("backend: {}", loaded.device);
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                            ModelRunner::create(*backends[0], config, weights, runner_options));
    loaded.backend = std::move(backends[0]);
    loaded.runner = std::move(runner);
    return loaded;
  }
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Communicator>> comms,
                          create_communicators(backends));
  const bool on_gpus = backends[0]->kind() == DeviceKind::kCuda;
  loaded.parallelism = fmt::format("tensor parallel {} ({})", n, comms[0]->name());
  loaded.kv_scope = on_gpus ? "per GPU" : "per rank";
  log_info("backend: {} x {}, {}", loaded.device, n, loaded.parallelism);
  RankResources resources;
  std::vector<Backend*> rank_backends;
  std::vector<Communicator*> rank_comms;
  for (size_t r = 0; r < backends.size(); ++r) {
    rank_backends.push_back(backends[r].get());
    rank_comms.push_back(comms[r].get());
  }
  resources.backends = std::move(backends);
  resources.communicators = std::move(comms);
  const ParallelRunner::RankFactory make_rank = [&](int rank) -> Result<std::unique_ptr<Runner>> {
    Backend& backend = *rank_backends[static_cast<size_t>(rank)];
    bind_to_thread(backend);
    RunnerOptions o = runner_options;
    o.tp = rank_comms[static_cast<size_t>(rank)];
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                            ModelRunner::create(backend, config, weights, o));
    return std::unique_ptr<Runner>(std::move(runner));
  };
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<ParallelRunner> runner,
                          ParallelRunner::create(n, make_rank, std::move(resources)));
  loaded.runner = std::move(runner);
  return loaded;
}

}  // namespace pagoda
