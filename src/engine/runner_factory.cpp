#include "engine/runner_factory.h"

#include <fmt/format.h>

#include <vector>

#include "backend/communicator.h"
#include "backend/profiling_backend.h"
#include "core/log.h"
#include "engine/backend_factory.h"
#include "model/model_runner.h"
#include "model/parallel_runner.h"
#include "model/pipeline_parallel.h"
#include "model/tensor_parallel.h"
#include "parallel/cpu_communicator.h"
#ifdef PAGODA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_op_timer.h"
#include "backend/cuda/nccl_communicator.h"
#endif

namespace pagoda {
namespace {

// One group's communicators, rank i's for backends[i].
Result<std::vector<std::unique_ptr<Communicator>>> create_communicators(
    const std::vector<Backend*>& backends) {
#ifdef PAGODA_HAVE_CUDA
  if (backends[0]->kind() == DeviceKind::kCuda) {
    std::vector<CudaBackend*> cuda;
    for (Backend* b : backends) cuda.push_back(static_cast<CudaBackend*>(b));
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

// "--tensor-parallel-size 2", "--pipeline-parallel-size 2" or both joined by " x ".
std::string parallel_flags(int tp, int pp) {
  std::string f = tp > 1 || pp == 1 ? fmt::format("--tensor-parallel-size {}", tp) : "";
  if (pp > 1) f += fmt::format("{}--pipeline-parallel-size {}", f.empty() ? "" : " x ", pp);
  return f;
}

// "tensor parallel 2", "pipeline parallel 2 (layers 0-2 | 3-4)", or both
// joined by " x ".
std::string describe_parallelism(const ModelConfig& config, int tp, int pp) {
  std::string d = tp > 1 ? fmt::format("tensor parallel {}", tp) : "";
  if (pp > 1) {
    std::string layers;
    for (int s = 0; s < pp; ++s) {
      const IndexRange r = pp_layers(config, {s, pp});
      layers += fmt::format("{}{}-{}", s == 0 ? "" : " | ", r.begin, r.end - 1);
    }
    d += fmt::format("{}pipeline parallel {} (layers {})", d.empty() ? "" : " x ", pp, layers);
  }
  return d;
}

// `backend` inside a ProfilingBackend with the timer of its kind: CUDA events
// on its stream, or the host clock (the cpu backend runs ops synchronously).
std::unique_ptr<Backend> profiling(std::unique_ptr<Backend> backend) {
  std::unique_ptr<OpTimer> timer;
#ifdef PAGODA_HAVE_CUDA
  if (backend->kind() == DeviceKind::kCuda)
    timer = std::make_unique<CudaOpTimer>(static_cast<CudaBackend&>(*backend).stream());
#endif
  if (timer == nullptr) timer = std::make_unique<HostOpTimer>();
  return std::make_unique<ProfilingBackend>(std::move(backend), std::move(timer));
}

}  // namespace

Result<LoadedRunner> load_runner(const EngineOptions& options, const ModelConfig& config,
                                 WeightSource& weights, const RunnerOptions& runner_options) {
  const int tp = options.tensor_parallel_size, pp = options.pipeline_parallel_size;
  const int n = tp * pp;
  PAGODA_RETURN_IF_ERROR(validate_tensor_parallel(config, tp));
  PAGODA_RETURN_IF_ERROR(validate_pipeline_parallel(config, pp));
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Backend>> backends,
                          create_backends(options.device, config, n, parallel_flags(tp, pp)));
  LoadedRunner loaded;
  loaded.device = backends[0]->name();
  loaded.weight_precision =
      describe_quantization(config.quantization, dtype_name(backends[0]->compute_dtype()));
  if (options.profile_ops && n > 1)
    return make_error(ErrorCode::kUnsupported,
                      "--profile-ops times one device: drop --tensor-parallel-size and "
                      "--pipeline-parallel-size");
  if (n == 1) {
    log_info("backend: {}", loaded.device);
    if (options.profile_ops) backends[0] = profiling(std::move(backends[0]));
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                            ModelRunner::create(*backends[0], config, weights, runner_options));
    loaded.backend = std::move(backends[0]);
    loaded.runner = std::move(runner);
    return loaded;
  }
  // Rank r = s * tp + t is rank t of stage s: it joins its stage's tp group
  // and the pp group of the ranks t across the stages.
  RankResources resources;
  std::vector<Communicator*> rank_tp(static_cast<size_t>(n)), rank_pp(static_cast<size_t>(n));
  auto add_group = [&](const std::vector<int>& ranks, std::vector<Communicator*>& slot) -> Status {
    std::vector<Backend*> group;
    for (int r : ranks) group.push_back(backends[static_cast<size_t>(r)].get());
    PAGODA_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Communicator>> comms,
                            create_communicators(group));
    for (size_t i = 0; i < ranks.size(); ++i) {
      slot[static_cast<size_t>(ranks[i])] = comms[i].get();
      resources.communicators.push_back(std::move(comms[i]));
    }
    return {};
  };
  for (int s = 0; tp > 1 && s < pp; ++s) {
    std::vector<int> ranks;
    for (int t = 0; t < tp; ++t) ranks.push_back(s * tp + t);
    PAGODA_RETURN_IF_ERROR(add_group(ranks, rank_tp));
  }
  for (int t = 0; pp > 1 && t < tp; ++t) {
    std::vector<int> ranks;
    for (int s = 0; s < pp; ++s) ranks.push_back(s * tp + t);
    PAGODA_RETURN_IF_ERROR(add_group(ranks, rank_pp));
  }
  const bool on_gpus = backends[0]->kind() == DeviceKind::kCuda;
  loaded.parallelism = fmt::format("{} ({})", describe_parallelism(config, tp, pp),
                                   resources.communicators[0]->name());
  loaded.kv_scope = on_gpus ? "per GPU" : "per rank";
  log_info("backend: {} x {}, {}", loaded.device, n, loaded.parallelism);
  std::vector<Backend*> rank_backends;
  for (const auto& b : backends) rank_backends.push_back(b.get());
  resources.backends = std::move(backends);
  const ParallelRunner::RankFactory make_rank = [&](int rank) -> Result<std::unique_ptr<Runner>> {
    Backend& backend = *rank_backends[static_cast<size_t>(rank)];
    bind_to_thread(backend);
    RunnerOptions o = runner_options;
    o.tp = rank_tp[static_cast<size_t>(rank)];
    o.pp = rank_pp[static_cast<size_t>(rank)];
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                            ModelRunner::create(backend, config, weights, o));
    return std::unique_ptr<Runner>(std::move(runner));
  };
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<ParallelRunner> runner,
                          ParallelRunner::create(n, make_rank, std::move(resources), pp));
  loaded.runner = std::move(runner);
  return loaded;
}

}  // namespace pagoda
