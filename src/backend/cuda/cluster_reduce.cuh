// A row's maximum over the CTAs of a thread-block cluster (sm_90), through
// distributed shared memory: the FP8 producers that split one token's row
// over several SMs (activation_kernels.cu) reduce their partial max |x| with
// it. Included only by .cu files of backend/cuda.
#pragma once

#include <cooperative_groups.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_quant.cuh"

namespace pagoda::cuda {

// The maximum of x over every thread of the cluster; every thread of every
// CTA calls it and gets the result (a plain launch is a 1-CTA cluster:
// block_max). With more than one CTA the caller must call
// cluster_reduce_done() before it exits: another CTA may still be reading
// this CTA's partial. The order of the CTAs' partials does not matter for a
// max, so the result is that of one CTA reducing the whole row.
__device__ __forceinline__ float cluster_max(float x) {
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  x = block_max(x);
  const unsigned num_ctas = cluster.num_blocks();
  if (num_ctas == 1) return x;
  __shared__ float cta_max;
  if (threadIdx.x == 0) cta_max = x;
  cluster.sync();  // every CTA has started and written its partial
  const unsigned lane = threadIdx.x & 31;  // num_ctas <= 8 (launch_kernel_cluster)
  const float v = lane < num_ctas ? *cluster.map_shared_rank(&cta_max, lane) : 0.0f;
  cluster.barrier_arrive();  // this thread's remote reads are done
  return warp_max(v);
}

// Waits until every CTA of the cluster has read the partials (pairs with
// cluster_max's arrive; a no-op in a 1-CTA cluster). Call from every thread
// after cluster_max, as late as possible: it overlaps the wait with the
// caller's stores.
__device__ __forceinline__ void cluster_reduce_done() {
  namespace cg = cooperative_groups;
  if (cg::this_cluster().num_blocks() > 1) cg::this_cluster().barrier_wait();
}

}  // namespace pagoda::cuda
