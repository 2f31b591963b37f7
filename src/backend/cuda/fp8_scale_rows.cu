// The epilogue of the unscaled FP8 GEMM (fp8_linear_kernels.h): one thread
// per output element, out = acc * x_scale[row] * w_scale[col] (+ bias).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 256;


template <typename O>
__global__ void __launch_bounds__(kThreads) scale_rows_kernel(Fp8ScaleRowsParams p) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= p.rows * p.n) return;
  const int64_t r = i / p.n, c = i % p.n;
  float v = p.acc[i] * p.x_scales[r] * p.w_scales[c];
  if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, c);
  static_cast<O*>(p.out)[i] = from_float<O>(v);
}

}  // namespace

cudaError_t launch_fp8_scale_rows(const Fp8ScaleRowsParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  const int64_t blocks = ceil_div(p.rows * p.n, kThreads);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks));
  switch (p.out_dtype) {
    case DType::kF32:
      launch_kernel(scale_rows_kernel<float>, grid, kThreads, 0, stream, p);
      break;
    case DType::kBF16:
      launch_kernel(scale_rows_kernel<bf16>, grid, kThreads, 0, stream, p);
      break;
    case DType::kF16:
      launch_kernel(scale_rows_kernel<f16>, grid, kThreads, 0, stream, p);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
