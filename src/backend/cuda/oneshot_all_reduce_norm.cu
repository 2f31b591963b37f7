// The fused one-shot all-reduce + residual add + RMSNorm
// (oneshot_all_reduce.h: launch_oneshot_all_reduce_norm): one kernel on
// either protocol, which differ only in how a block obtains the ranks' rows
// (PeerSum: BarrierSum, PushSum); the arithmetic and thread layout are shared,
// so both protocols give the same bits.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/oneshot_all_reduce.h"
#include "backend/cuda/oneshot_protocol.cuh"
#include "backend/cuda/oneshot_push.cuh"

namespace pagoda::cuda {
namespace {

using namespace oneshot;

// A PeerSum is how block b of the fused kernel gets the rank-order sum of
// the ranks' vectors at element `at` of its k-th row (k: the block's rows b,
// b + grid, ... counted from 0), in calls made by every thread:
//   Sum sum(g)                    takes this launch's epoch or stage;
//   push(g, k, hidden, at, v)     this rank's vector towards every rank;
//   wait(g)                       once, between the pushes and the collects;
//   collect(g, k, hidden, at)     the sum, once every rank's vector arrived
//                                 (unspecified after an abort or time-out).
// A thread collects exactly the vectors it pushed.

// The barrier protocol: the fused family's data halves (slot per source
// rank, cut in kOneShotBlocks regions), the per-block barrier, local loads.
struct BarrierSum {
  uint32_t epoch;

  __device__ __forceinline__ explicit BarrierSum(const OneShotParams& g)
      : epoch(next_epoch(g.buffers[g.rank], kNormCounters)) {}

  // Row k of source rank `src`'s slot, block blockIdx.x's region, in data
  // half (epoch & 1) of `buffer`.
  template <typename T>
  __device__ __forceinline__ T* slot_row(void* buffer, const OneShotParams& g, int src, int64_t k,
                                         int64_t hidden) const {
    const size_t half = static_cast<size_t>(g.size) * g.capacity;
    char* base = static_cast<char*>(buffer) + kDataOffset + 2 * g.capacity + (epoch & 1u) * half +
                 static_cast<size_t>(src) * g.capacity + blockIdx.x * region_bytes(g.capacity);
    return reinterpret_cast<T*>(base) + k * hidden;
  }

  template <typename T, int kVec>
  __device__ __forceinline__ void push(const OneShotParams& g, int64_t k, int64_t hidden,
                                       int64_t at, const Vec<T, kVec>& v) const {
#pragma unroll
    for (int j = 0; j < kOneShotMaxRanks; ++j) {
      if (j < g.size) store_vec<T, kVec>(slot_row<T>(g.buffers[j], g, g.rank, k, hidden) + at, v);
    }
  }

  __device__ __forceinline__ void wait(const OneShotParams& g) const {
    block_barrier(g.buffers, g.size, g.rank, kNormFlags, epoch, g.control);
  }

  template <typename T, int kVec>
  __device__ __forceinline__ Vec<T, kVec> collect(const OneShotParams& g, int64_t k, int64_t hidden,
                                                  int64_t at) {
    Vec<T, kVec> v[kOneShotMaxRanks];
#pragma unroll
    for (int j = 0; j < kOneShotMaxRanks; ++j) {
      if (j < g.size)
        v[j] = load_vec<T, kVec>(slot_row<T>(g.buffers[g.rank], g, j, k, hidden) + at);
    }
    return sum_in_rank_order<T, kVec>(v, g.size);
  }
};

// The push protocol (oneshot_push.cuh): the fused family's stages, each
// slot cut in kOneShotBlocks regions; no barrier, each thread polls for its
// own vectors.
struct PushSum {
  uint32_t stage;
  PollBudget budget;

  __device__ __forceinline__ explicit PushSum(const OneShotParams& g)
      : stage(next_stage(g.buffers[g.rank], kPushNormCounters)), budget(g.control) {}

  // Element offset of row k in block blockIdx.x's region of a push slot.
  template <typename T>
  __device__ __forceinline__ static size_t region_row(const OneShotParams& g, int64_t k,
                                                      int64_t hidden) {
    return blockIdx.x * region_bytes(push_capacity(g.capacity)) / sizeof(T) +
           static_cast<size_t>(k * hidden);
  }

  template <typename T, int kVec>
  __device__ __forceinline__ void push(const OneShotParams& g, int64_t k, int64_t hidden,
                                       int64_t at, const Vec<T, kVec>& v) const {
    push_vec<T, kVec>(g, kPushNorm, stage, region_row<T>(g, k, hidden) + at, v);
  }

  __device__ __forceinline__ void wait(const OneShotParams&) const {}

  template <typename T, int kVec>
  __device__ __forceinline__ Vec<T, kVec> collect(const OneShotParams& g, int64_t k, int64_t hidden,
                                                  int64_t at) {
    return collect_vec<T, kVec>(g, kPushNorm, stage, region_row<T>(g, k, hidden) + at, budget);
  }
};

// Block b owns rows b, b + grid, ...; thread t pushes and collects the same
// vectors of each row. kVec: elements per thread step (16 bytes when hidden
// allows, else 1: the choice depends on hidden only, so every rank runs the
// same arithmetic); kAligned: x, residual, weight and out are 16-byte
// aligned (vector accesses; slots always are); kMaxThreads: the launch bound,
// at least blockDim.x (launch_typed: rms_norm's layout; at 1024 the
// registers are capped at 64 a thread, without which hidden 8200 would fail
// with cudaErrorLaunchOutOfResources; at 512 the ranks' vectors of a poll
// never spill). A thread whose wait gave up goes on with unspecified values
// (the row sums need every thread).
//
// Latency: every load that does not depend on the peers is issued before
// something that waits: (kMaxThreads 512, kCache) the thread's first vector
// of x, residual and weight before the epoch or stage counter's round trip,
// each later residual vector before its collect (and, kCache, the next
// row's first one before this row's sum), and (kCache) the summed
// residual's first vector stays in registers for the normalisation.
template <typename Sum, typename T, int kVec, bool kAligned, int kMaxThreads>
__global__ void __launch_bounds__(kMaxThreads) oneshot_all_reduce_norm_kernel(OneShotNormParams p) {
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
  Sum sum(g);

  // 1. Push the block's rows of x towards every rank.
  for (int64_t row = blockIdx.x, k = 0; row < p.rows; row += grid, ++k) {
    const T* x = x_row(row);
    for (int64_t i = first; i < num_vec; i += blockDim.x) {
      const Vec<T, kVec> v =
          kCache && k == 0 && i == first ? x_first : load_vec_any<T, kVec, kAligned>(x + i * kVec);
      sum.template push<T, kVec>(g, k, p.hidden, i * kVec, v);
    }
  }

  sum.wait(g);

  // 2. Collect the sums (local memory) in rank order, add, normalise.
  for (int64_t row = blockIdx.x, k = 0; row < p.rows; row += grid, ++k) {
    T* x = x_row(row);
    T* res = res_row(row);
    T* out = static_cast<T*>(p.out) + row * p.hidden;
    float sum_sq = 0.0f;
    Vec<T, kVec> sum_first = res_first;  // residual + x at the first vector
    for (int64_t i = first; i < num_vec; i += blockDim.x) {
      Vec<T, kVec> r =
          kCache && i == first ? res_first : load_vec_any<T, kVec, kAligned>(res + i * kVec);
      const Vec<T, kVec> s = sum.template collect<T, kVec>(g, k, p.hidden, i * kVec);
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

template <typename Sum, typename T>
cudaError_t launch_typed(const OneShotNormParams& p, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vec = p.hidden % kVec == 0;
  const bool aligned = is_aligned(p.x, 16) && is_aligned(p.residual, 16) &&
                       is_aligned(p.weight, 16) && is_aligned(p.out, 16);
  const int threads = norm_threads(p.hidden, vec ? kVec : 1);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(p.rows, kOneShotBlocks));
  auto kernel = oneshot_all_reduce_norm_kernel<Sum, T, 1, false, 1024>;
  if (vec && aligned && threads <= 512) {
    kernel = oneshot_all_reduce_norm_kernel<Sum, T, kVec, true, 512>;
  } else if (vec && aligned) {
    kernel = oneshot_all_reduce_norm_kernel<Sum, T, kVec, true, 1024>;
  } else if (vec) {
    kernel = oneshot_all_reduce_norm_kernel<Sum, T, kVec, false, 1024>;
  }
  return launch_kernel(kernel, blocks, threads, 0, stream, p);
}

}  // namespace

bool oneshot_norm_fits(int64_t rows, int64_t hidden, DType dtype, size_t capacity) {
  if (rows <= 0 || hidden <= 0) return false;
  const int64_t grid = std::min<int64_t>(rows, kOneShotBlocks);
  const int64_t per_block = ceil_div(rows, grid);
  return static_cast<size_t>(per_block * hidden) * dtype_size(dtype) <= region_bytes(capacity);
}

cudaError_t launch_oneshot_all_reduce_norm(const OneShotNormParams& p, cudaStream_t stream) {
  const OneShotParams& g = p.group;
  if (g.size < 2 || g.size > kOneShotMaxRanks || g.rank < 0 || g.rank >= g.size ||
      g.capacity % 16 != 0 || g.control == nullptr || p.x == nullptr || p.residual == nullptr ||
      p.weight == nullptr || p.out == nullptr || p.rows > 0x7fffffff ||
      !oneshot_norm_fits(p.rows, p.hidden, p.dtype, g.capacity)) {
    return cudaErrorInvalidValue;
  }
  const bool push = g.protocol == OneShotProtocol::kPush &&
                    oneshot_norm_fits(p.rows, p.hidden, p.dtype, push_capacity(g.capacity));
  return dispatch_float(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    return push ? launch_typed<PushSum, T>(p, stream) : launch_typed<BarrierSum, T>(p, stream);
  });
}

}  // namespace pagoda::cuda
