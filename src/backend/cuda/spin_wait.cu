#include "backend/cuda/spin_wait.h"

namespace pagoda::cuda {

namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_wait_kernel(uint64_t nanoseconds) {
  const uint64_t start = global_ns();
  while (global_ns() - start < nanoseconds) __nanosleep(1000);
}

}  // namespace

cudaError_t launch_spin_wait(const SpinWaitParams& p, cudaStream_t stream) {
  spin_wait_kernel<<<1, 1, 0, stream>>>(p.nanoseconds);
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
