// The fused one-shot all-reduce + residual add + RMSNorm on the push protocol
// (oneshot_push.cuh), launched by launch_oneshot_all_reduce_norm when
// OneShotParams::protocol is kPush and the rows fit the push stages' per-block
// regions (push_norm_fits). The arithmetic and thread layout are those of the
// barrier kernel (oneshot_all_reduce_norm.cu), so the bits are the same.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/oneshot_push.cuh"

namespace pagoda::cuda::oneshot {
namespace {

// Element offset of row k (the block's k-th row) in block blockIdx.x's
// region of a push slot (the slot cut in kOneShotBlocks regions).
__device__ __forceinline__ size_t region_row(const OneShotParams& g, size_t elem_bytes, int64_t k,
                                             int64_t hidden) {
  return blockIdx.x * region_bytes(push_capacity(g.capacity)) / elem_bytes +
         static_cast<size_t>(k * hidden);
}

// kVec: elements per thread step (16 bytes when hidden allows, else 1);
// kAligned: x, residual, weight and out are 16-byte aligned. Block b owns rows
// b, b + grid, ...; thread t pushes and collects the same vectors of each
// row, so it waits only for its own data. A thread whose wait gave up goes on
// with unspecified values (block_sum needs every thread).
template <typename T, int kVec, bool kAligned>
__global__ void __launch_bounds__(1024) oneshot_push_all_reduce_norm_kernel(OneShotNormParams p) {
  pdl_enter();  // the partial x is written; the previous launch is complete
  const OneShotParams& g = p.group;
  const uint32_t stage = next_stage(g.buffers[g.rank], kPushNormCounters);
  const int64_t num_vec = p.hidden / kVec;
  const int64_t grid = gridDim.x;

  // 1. Push the block's rows of x into its region of every rank's slot `rank`.
  for (int64_t row = blockIdx.x, k = 0; row < p.rows; row += grid, ++k) {
    const T* x = static_cast<const T*>(p.x) + row * p.hidden;
    const size_t base = region_row(g, sizeof(T), k, p.hidden);
    for (int64_t i = threadIdx.x; i < num_vec; i += blockDim.x) {
      push_vec<T, kVec>(g, kPushNorm, stage, base + i * kVec,
                        load_vec_any<T, kVec, kAligned>(x + i * kVec));
    }
  }

  // 2. Collect the slots (local memory) in rank order, add, normalise.
  PollBudget budget(g.control);
  const T* w = static_cast<const T*>(p.weight);
  for (int64_t row = blockIdx.x, k = 0; row < p.rows; row += grid, ++k) {
    T* x = static_cast<T*>(p.x) + row * p.hidden;
    T* res = static_cast<T*>(p.residual) + row * p.hidden;
    T* out = static_cast<T*>(p.out) + row * p.hidden;
    const size_t base = region_row(g, sizeof(T), k, p.hidden);
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < num_vec; i += blockDim.x) {
      const Vec<T, kVec> s = collect_vec<T, kVec>(g, kPushNorm, stage, base + i * kVec, budget);
      store_vec_any<T, kVec, kAligned>(x + i * kVec, s);
      Vec<T, kVec> r = load_vec_any<T, kVec, kAligned>(res + i * kVec);
#pragma unroll
      for (int e = 0; e < kVec; ++e) r.v[e] = from_float<T>(to_float(r.v[e]) + to_float(s.v[e]));
      store_vec_any<T, kVec, kAligned>(res + i * kVec, r);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float f = to_float(r.v[e]);
        sum_sq += f * f;
      }
    }
    sum_sq = block_sum(sum_sq);
    const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
    for (int64_t i = threadIdx.x; i < num_vec; i += blockDim.x) {
      const Vec<T, kVec> r = load_vec_any<T, kVec, kAligned>(res + i * kVec);
      const Vec<T, kVec> wv = load_vec_any<T, kVec, kAligned>(w + i * kVec);
      Vec<T, kVec> o;
#pragma unroll
      for (int e = 0; e < kVec; ++e) o.v[e] = norm_apply<T>(to_float(r.v[e]), inv, wv.v[e]);
      store_vec_any<T, kVec, kAligned>(out + i * kVec, o);
    }
  }
}

template <typename T>
cudaError_t launch_typed(const OneShotNormParams& p, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vec = p.hidden % kVec == 0;
  const bool aligned = is_aligned(p.x, 16) && is_aligned(p.residual, 16) &&
                       is_aligned(p.weight, 16) && is_aligned(p.out, 16);
  // launch_rms_norm's thread count for the same vector width.
  const int64_t num_vec = vec ? p.hidden / kVec : p.hidden;
  const int threads = static_cast<int>(num_vec >= 1024 ? 1024 : ceil_div(num_vec, 32) * 32);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(p.rows, kOneShotBlocks));
  if (vec && aligned)
    return launch_kernel(oneshot_push_all_reduce_norm_kernel<T, kVec, true>, blocks, threads, 0,
                         stream, p);
  if (vec)
    return launch_kernel(oneshot_push_all_reduce_norm_kernel<T, kVec, false>, blocks, threads, 0,
                         stream, p);
  return launch_kernel(oneshot_push_all_reduce_norm_kernel<T, 1, false>, blocks, threads, 0, stream,
                       p);
}

}  // namespace

cudaError_t launch_push_all_reduce_norm(const OneShotNormParams& p, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kF32:
      return launch_typed<float>(p, stream);
    case DType::kBF16:
      return launch_typed<bf16>(p, stream);
    case DType::kF16:
      return launch_typed<f16>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace pagoda::cuda::oneshot
