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
// kAligned: x, residual, weight and out are 16-byte aligned; kMaxThreads: the
// launch bound, at least blockDim.x (the registers a thread may use grow as
// it shrinks: at 512, the ranks' vectors of a poll never spill). Block b owns
// rows b, b + grid, ...; thread t pushes and collects the same vectors of
// each row, so it waits only for its own data. A thread whose wait gave up
// goes on with unspecified values (the row sums need every thread).
//
// Latency: every load that does not depend on the peers is issued before
// something that waits: (kMaxThreads 512, kCache) the thread's first vector of x, residual and
// weight before the stage counter's round trip, each later residual vector before its poll (and,
// kCache, the next row's first one before this row's sum), and (kCache) the summed residual's first
// vector stays in registers for the normalisation.
template <typename T, int kVec, bool kAligned, int kMaxThreads>
__global__ void __launch_bounds__(kMaxThreads)
    oneshot_push_all_reduce_norm_kernel(OneShotNormParams p) {
  pdl_enter();  // the partial x is written; the previous launch is complete
  const OneShotParams& g = p.group;
  const int64_t num_vec = p.hidden / kVec;
  const int64_t grid = gridDim.x;
  const int64_t first = threadIdx.x;  // the thread's first vector of every row
  // The register cache of the first vectors only where registers allow
  // (a 1024-thread block has 64 a thread, already short for the poll).
  constexpr bool kCache = kMaxThreads <= 512;
  const bool has_first = kCache && first < num_vec;
  const T* w = static_cast<const T*>(p.weight);
  auto x_row = [&](int64_t row) { return static_cast<T*>(p.x) + row * p.hidden; };
  auto res_row = [&](int64_t row) { return static_cast<T*>(p.residual) + row * p.hidden; };

  Vec<T, kVec> x_first{}, res_first{}, w_first{};
  if (has_first) {
    x_first = load_vec_any<T, kVec, kAligned>(x_row(blockIdx.x) + first * kVec);
    res_first = load_vec_any<T, kVec, kAligned>(res_row(blockIdx.x) + first * kVec);
    w_first = load_vec_any<T, kVec, kAligned>(w + first * kVec);
  }
  const uint32_t stage = next_stage(g.buffers[g.rank], kPushNormCounters);

  // 1. Push the block's rows of x into its region of every rank's slot `rank`.
  for (int64_t row = blockIdx.x, k = 0; row < p.rows; row += grid, ++k) {
    const T* x = x_row(row);
    const size_t base = region_row(g, sizeof(T), k, p.hidden);
    for (int64_t i = first; i < num_vec; i += blockDim.x) {
      const Vec<T, kVec> v =
          kCache && k == 0 && i == first ? x_first : load_vec_any<T, kVec, kAligned>(x + i * kVec);
      push_vec<T, kVec>(g, kPushNorm, stage, base + i * kVec, v);
    }
  }

  // 2. Collect the slots (local memory) in rank order, add, normalise.
  PollBudget budget(g.control);
  for (int64_t row = blockIdx.x, k = 0; row < p.rows; row += grid, ++k) {
    T* x = x_row(row);
    T* res = res_row(row);
    T* out = static_cast<T*>(p.out) + row * p.hidden;
    const size_t base = region_row(g, sizeof(T), k, p.hidden);
    float sum_sq = 0.0f;
    Vec<T, kVec> sum_first = res_first;  // residual + x at the first vector
    for (int64_t i = first; i < num_vec; i += blockDim.x) {
      Vec<T, kVec> r =
          kCache && i == first ? res_first : load_vec_any<T, kVec, kAligned>(res + i * kVec);
      const Vec<T, kVec> s = collect_vec<T, kVec>(g, kPushNorm, stage, base + i * kVec, budget);
      store_vec_any<T, kVec, kAligned>(x + i * kVec, s);
#pragma unroll
      for (int e = 0; e < kVec; ++e) r.v[e] = from_float<T>(to_float(r.v[e]) + to_float(s.v[e]));
      store_vec_any<T, kVec, kAligned>(res + i * kVec, r);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float f = to_float(r.v[e]);
        sum_sq += f * f;
      }
      if (kCache && i == first) sum_first = r;
    }
    if (has_first && row + grid < p.rows)
      res_first = load_vec_any<T, kVec, kAligned>(res_row(row + grid) + first * kVec);
    sum_sq = block_sum_alternating(sum_sq, static_cast<uint32_t>(k) & 1u);
    const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
    for (int64_t i = first; i < num_vec; i += blockDim.x) {
      const Vec<T, kVec> r =
          kCache && i == first ? sum_first : load_vec_any<T, kVec, kAligned>(res + i * kVec);
      const Vec<T, kVec> wv =
          kCache && i == first ? w_first : load_vec_any<T, kVec, kAligned>(w + i * kVec);
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
  const int threads = norm_threads(p.hidden, vec ? kVec : 1);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(p.rows, kOneShotBlocks));
  if (vec && aligned && threads <= 512)
    return launch_kernel(oneshot_push_all_reduce_norm_kernel<T, kVec, true, 512>, blocks, threads,
                         0, stream, p);
  if (vec && aligned)
    return launch_kernel(oneshot_push_all_reduce_norm_kernel<T, kVec, true, 1024>, blocks, threads,
                         0, stream, p);
  if (vec)
    return launch_kernel(oneshot_push_all_reduce_norm_kernel<T, kVec, false, 1024>, blocks, threads,
                         0, stream, p);
  return launch_kernel(oneshot_push_all_reduce_norm_kernel<T, 1, false, 1024>, blocks, threads, 0,
                       stream, p);
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
