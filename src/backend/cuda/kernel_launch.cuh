// Kernel launches with programmatic dependent launch (PDL, sm_90): a kernel
// launched through launch_kernel() may be scheduled while the previous
// kernel on the stream is finishing, so launch latency and ramp-up overlap
// the previous kernel's tail (also inside CUDA graphs, where stream capture
// turns the attribute into programmatic edges).
//
// Contract: every kernel launched this way calls pdl_enter() before it reads
// or writes any global memory. pdl_enter() waits until the preceding grid has
// completed and its writes are visible (griddepcontrol.wait), then lets the
// next grid start launching (griddepcontrol.launch_dependents). Since each
// kernel waits for its predecessor, which waited for its own, ordering is
// the same as without PDL. A kernel launched without the attribute (or after
// a library kernel such as cuBLASLt's, which never triggers early) just
// starts when its predecessor ends; griddepcontrol.wait is then a no-op.
//
// PAGODA_PDL=0 in the environment turns the attribute off (A/B timing).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace pagoda::cuda {

__device__ __forceinline__ void pdl_enter() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

inline bool pdl_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("PAGODA_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute and,
// with cluster_x > 1, thread-block clusters of cluster_x consecutive CTAs
// along x (sm_90; gridDim.x a multiple of cluster_x, cluster_x <= 8, the
// portable size). Graph capture records both attributes.
template <typename... Params, typename... Args>
cudaError_t launch_kernel_cluster(void (*kernel)(Params...), dim3 grid, dim3 block,
                                  unsigned cluster_x, size_t smem, cudaStream_t stream,
                                  Args&&... args) {
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster_x;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = cluster_x > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, Args&&... args) {
  return launch_kernel_cluster(kernel, grid, block, 1, smem, stream, std::forward<Args>(args)...);
}

}  // namespace pagoda::cuda
