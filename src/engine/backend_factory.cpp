#include "engine/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#ifdef PAGODA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace pagoda {

Result<std::unique_ptr<Backend>> create_backend(const std::string& device, const ModelConfig& config) {
  if (device != "cpu" && device != "cuda" && device != "auto") {
    return make_error(ErrorCode::kInvalidArgument, "--device must be cpu, cuda or auto, got '" + device + "'");
  }
#ifdef PAGODA_HAVE_CUDA
  if (device != "cpu") {
    DType dtype = config.dtype == DType::kF16 ? DType::kF16 : DType::kBF16;
    std::string why;
    std::unique_ptr<Backend> cuda = create_cuda_backend(0, dtype, &why);
    if (cuda) return cuda;
    if (device == "cuda") return make_error(ErrorCode::kUnsupported, "--device cuda: no usable CUDA GPU: " + why);
    log_info("no usable CUDA GPU, using the CPU backend: {}", why);
  }
#else
  if (device == "cuda") {
    return make_error(ErrorCode::kUnsupported, "--device cuda: this build has no CUDA backend (PAGODA_CUDA=OFF)");
  }
#endif
  return create_cpu_backend();
}

}  // namespace pagoda
