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
  const int64_t idx = static_cast<int64_t>(p.indices[r]) - p.first_index;
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

// One thread per output element, consecutive threads consecutive columns.
__global__ void gather_columns_kernel(GatherColumnsParams p) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.num_rows * p.num_cols) return;
  const int64_t r = i / p.num_cols, c = i % p.num_cols;
  p.out[i] = p.src[r * p.num_cols + __ldg(p.indices + c)];
}

}  // namespace

cudaError_t launch_gather_columns(const GatherColumnsParams& p, cudaStream_t stream) {
  const int64_t n = p.num_rows * p.num_cols;
  if (n == 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  return launch_kernel(gather_columns_kernel, static_cast<unsigned>(blocks), 256, 0, stream, p);
}

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
