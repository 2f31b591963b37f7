// The plain one-shot all-reduce on the push protocol (oneshot_push.cuh),
// launched by launch_oneshot_all_reduce for messages up to
// oneshot_push_capacity when OneShotParams::protocol is kPush.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/oneshot_push.cuh"

namespace pagoda::cuda::oneshot {
namespace {

// Unit u of x: elements [u * kVec, min(n, (u + 1) * kVec)), the missing ones
// +0.0 (a unit past the last whole vector is pushed and reset whole, so the
// stage's 16 bytes stay all-sentinel or all-written).
template <typename T, int kVec, bool kAligned>
__device__ __forceinline__ Vec<T, kVec> load_unit(const T* x, int64_t u, int64_t n) {
  if ((u + 1) * kVec <= n) return load_vec_any<T, kVec, kAligned>(x + u * kVec);
  Vec<T, kVec> v;
#pragma unroll
  for (int e = 0; e < kVec; ++e) v.v[e] = u * kVec + e < n ? x[u * kVec + e] : from_float<T>(0.0f);
  return v;
}

template <typename T, int kVec, bool kAligned>
__device__ __forceinline__ void store_unit(T* x, int64_t u, int64_t n, const Vec<T, kVec>& v) {
  if ((u + 1) * kVec <= n) return store_vec_any<T, kVec, kAligned>(x + u * kVec, v);
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    if (u * kVec + e < n) x[u * kVec + e] = v.v[e];
  }
}

// Unit u (16 bytes of the stage) always belongs to thread u % kThreads of
// block (u / kThreads) % kBlocks, as in the barrier kernel, and the grid
// holds only the blocks that own units. Each thread pushes all its units
// first, then collects them; no thread waits for another of its block.
template <typename T, bool kAligned>
__global__ void __launch_bounds__(kOneShotThreads) oneshot_push_all_reduce_kernel(OneShotParams p) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int64_t kStride = int64_t{kOneShotBlocks} * kOneShotThreads;
  pdl_enter();  // the previous kernel on the stream (e.g. the last launch) is complete
  const uint32_t stage = next_stage(p.buffers[p.rank], kPushCounters);

  T* x = static_cast<T*>(p.x);
  const int64_t num_units = (p.n + kVec - 1) / kVec;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * kOneShotThreads + threadIdx.x;
  for (int64_t u = start; u < num_units; u += kStride) {
    push_vec<T, kVec>(p, kPushAllReduce, stage, static_cast<size_t>(u) * kVec,
                      load_unit<T, kVec, kAligned>(x, u, p.n));
  }
  PollBudget budget(p.control);
  for (int64_t u = start; u < num_units; u += kStride) {
    const Vec<T, kVec> s =
        collect_vec<T, kVec>(p, kPushAllReduce, stage, static_cast<size_t>(u) * kVec, budget);
    if (budget.gave_up) return;  // x unspecified; the host reports the failure
    store_unit<T, kVec, kAligned>(x, u, p.n, s);
  }
}

template <typename T>
cudaError_t launch_typed(const OneShotParams& p, cudaStream_t stream) {
  const bool aligned = is_aligned(p.x, 16);
  auto kernel =
      aligned ? oneshot_push_all_reduce_kernel<T, true> : oneshot_push_all_reduce_kernel<T, false>;
  constexpr int64_t kVec = 16 / sizeof(T);
  const int64_t units = ceil_div(p.n, kVec);
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>(kOneShotBlocks, ceil_div(units, kOneShotThreads)));
  return launch_kernel(kernel, dim3(blocks), dim3(kOneShotThreads), 0, stream, p);
}

}  // namespace

cudaError_t launch_push_all_reduce(const OneShotParams& p, cudaStream_t stream) {
  return dispatch_float(p.dtype,
                        [&](auto zero) { return launch_typed<decltype(zero)>(p, stream); });
}

}  // namespace pagoda::cuda::oneshot
