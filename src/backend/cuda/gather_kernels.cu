#include "backend/cuda/gather_kernels.h"

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

// One block per output row; V is the access unit (16, 4, 2 or 1 bytes).
template <typename V>
__global__ void gather_rows_kernel(GatherRowsParams p) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int64_t n = p.row_bytes / static_cast<int64_t>(sizeof(V));
  const int32_t idx = p.indices[r];
  V* out = reinterpret_cast<V*>(static_cast<char*>(p.out) + r * p.row_bytes);
  if (idx < 0 || idx >= p.num_src_rows) {
    const V zero{};
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = zero;
    return;
  }
  const V* src =
      reinterpret_cast<const V*>(static_cast<const char*>(p.src) + idx * p.row_bytes);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = src[i];
}

template <typename V>
cudaError_t launch_typed(const GatherRowsParams& p, cudaStream_t stream) {
  const int64_t n = p.row_bytes / static_cast<int64_t>(sizeof(V));
  const int threads = static_cast<int>(n >= 256 ? 256 : ((n + 31) / 32) * 32);
  return launch_kernel(gather_rows_kernel<V>, static_cast<unsigned>(p.num_rows), threads, 0, stream,
                       p);
}

}  // namespace

cudaError_t launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream) {
  if (p.num_rows == 0 || p.row_bytes == 0) return cudaSuccess;
  if (p.num_rows > 0x7fffffff) return cudaErrorInvalidValue;
  auto fits = [&](uintptr_t a) {
    return p.row_bytes % static_cast<int64_t>(a) == 0 && is_aligned(p.src, a) && is_aligned(p.out, a);
  };
  if (fits(16)) return launch_typed<uint4>(p, stream);
  if (fits(4)) return launch_typed<uint32_t>(p, stream);
  if (fits(2)) return launch_typed<uint16_t>(p, stream);
  return launch_typed<uint8_t>(p, stream);
}

}  // namespace pagoda::cuda
