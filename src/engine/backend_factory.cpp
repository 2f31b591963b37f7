#include "engine/backend_factory.h"

#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#ifdef PAGODA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace pagoda {
namespace {

Status check_device(const std::string& device) {
  if (device != "cpu" && device != "cuda" && device != "auto") {
    return make_error(ErrorCode::kInvalidArgument, "--device must be cpu, cuda or auto, got '" + device + "'");
  }
#ifndef PAGODA_HAVE_CUDA
  if (device == "cuda") {
    return make_error(ErrorCode::kUnsupported, "--device cuda: this build has no CUDA backend (PAGODA_CUDA=OFF)");
  }
#endif
  return {};
}

#ifdef PAGODA_HAVE_CUDA
DType cuda_dtype(const ModelConfig& config) {
  return config.dtype == DType::kF16 ? DType::kF16 : DType::kBF16;
}
#endif

}  // namespace

Result<std::unique_ptr<Backend>> create_backend(const std::string& device, const ModelConfig& config) {
  PAGODA_RETURN_IF_ERROR(check_device(device));
#ifdef PAGODA_HAVE_CUDA
  if (device != "cpu") {
    std::string why;
    std::unique_ptr<Backend> cuda = create_cuda_backend(0, cuda_dtype(config), &why);
    if (cuda) return cuda;
    if (device == "cuda") return make_error(ErrorCode::kUnsupported, "--device cuda: no usable CUDA GPU: " + why);
    log_info("no usable CUDA GPU, using the CPU backend: {}", why);
  }
#else
  (void)config;
#endif
  return create_cpu_backend();
}

Result<std::vector<std::unique_ptr<Backend>>> create_backends(const std::string& device,
                                                              const ModelConfig& config, int count,
                                                              const std::string& flags) {
  std::vector<std::unique_ptr<Backend>> backends;
  if (count == 1) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Backend> one, create_backend(device, config));
    backends.push_back(std::move(one));
    return backends;
  }
  PAGODA_RETURN_IF_ERROR(check_device(device));
#ifdef PAGODA_HAVE_CUDA
  if (device != "cpu") {
    std::string why;
    const int gpus = cuda_device_count(&why);
    if (gpus < count && (device == "cuda" || gpus > 0)) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{} needs {} GPUs, this machine has {}{}", flags, count, gpus,
                                    why.empty() ? "" : " (" + why + ")"));
    }
    if (gpus >= count) {
      for (int d = 0; d < count; ++d) {
        std::unique_ptr<Backend> cuda = create_cuda_backend(d, cuda_dtype(config), &why);
        if (!cuda) return make_error(ErrorCode::kUnsupported, fmt::format("--device cuda: GPU {}: {}", d, why));
        backends.push_back(std::move(cuda));
      }
      return backends;
    }
    log_info("no CUDA GPU, using the CPU backend: {}", why);
  }
#else
  (void)config;
  (void)flags;
#endif
  for (int r = 0; r < count; ++r) backends.push_back(create_cpu_backend());
  return backends;
}

}  // namespace pagoda
