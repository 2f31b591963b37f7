#include "backend/cuda/rope_kernels.h"

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/head_ops.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

// One thread per rotated pair (token, head, i < R/2), grid-stride; the
// pass-through dims [R, D) are not touched.
template <typename T>
__global__ void rope_kernel(RopeParams p) {
  pdl_enter();
  const int half = p.rotary_dim / 2;
  const int64_t total = p.num_tokens * p.num_heads * half;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(idx % half);
    const int64_t th = idx / half;
    const int h = static_cast<int>(th % p.num_heads);
    const int64_t t = th / p.num_heads;
    const int32_t pos = p.positions[t];
    if (pos < 0 || pos >= p.num_positions) continue;
    const float* table = p.cos_sin + static_cast<int64_t>(pos) * p.rotary_dim;
    const float c = table[i];
    const float s = table[half + i];
    T* x = static_cast<T*>(p.qkv) + t * p.row_width + static_cast<int64_t>(h) * p.head_dim;
    const float x1 = to_float(x[i]);
    const float x2 = to_float(x[i + half]);
    x[i] = from_float<T>(rope_first(x1, x2, c, s));
    x[i + half] = from_float<T>(rope_second(x1, x2, c, s));
  }
}

}  // namespace

cudaError_t launch_rope(const RopeParams& p, cudaStream_t stream) {
  if (p.rotary_dim <= 0 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
    return cudaErrorInvalidValue;
  const int64_t total = p.num_tokens * p.num_heads * (p.rotary_dim / 2);
  if (total == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = ceil_div(total, kThreads);
  const unsigned grid = static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(rope_kernel<T>, grid, kThreads, 0, stream, p);
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
