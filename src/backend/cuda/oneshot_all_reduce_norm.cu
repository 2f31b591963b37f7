// The fused one-shot all-reduce + residual add + RMSNorm
// (oneshot_all_reduce.h: launch_oneshot_all_reduce_norm).
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

// Row k (the block's k-th row) of source rank `src`'s slot, block
// blockIdx.x's region, in data half (epoch & 1) of `buffer`.
template <typename T>
__device__ __forceinline__ T* slot_row(void* buffer, const OneShotParams& g, uint32_t epoch,
                                       int src, int64_t k, int64_t hidden) {
  const size_t half = static_cast<size_t>(g.size) * g.capacity;
  char* base = static_cast<char*>(buffer) + kDataOffset + 2 * g.capacity + (epoch & 1u) * half +
               static_cast<size_t>(src) * g.capacity + blockIdx.x * region_bytes(g.capacity);
  return reinterpret_cast<T*>(base) + k * hidden;
}

// kVec: elements per thread step (16 bytes when hidden allows, else 1: the
// choice depends on hidden only, so every rank runs the same arithmetic);
// kAligned: x, residual, weight and out are 16-byte aligned (vector
// accesses; slot rows always are); kMaxThreads: the launch bound, at least
// blockDim.x (launch_typed: rms_norm's layout; at 1024 the registers are
// capped at 64 a thread, without which hidden 8200 would fail with
// cudaErrorLaunchOutOfResources). As in the push kernel, each residual vector
// is loaded before its slot loads and, at kMaxThreads 512 (kCache), the
// thread's first vector of x, residual and weight before the epoch counter's
// round trip, the next row's first residual vector before this row's sum, and
// the summed residual's first vector stays in registers for the
// normalisation.
template <typename T, int kVec, bool kAligned, int kMaxThreads>
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
  const uint32_t epoch = next_epoch(g.buffers[g.rank], kNormCounters);

  // 1. Push the block's rows of x into its region of every rank's slot `rank`.
  for (int64_t row = blockIdx.x, k = 0; row < p.rows; row += grid, ++k) {
    const T* x = x_row(row);
    for (int64_t i = first; i < num_vec; i += blockDim.x) {
      const Vec<T, kVec> v =
          kCache && k == 0 && i == first ? x_first : load_vec_any<T, kVec, kAligned>(x + i * kVec);
#pragma unroll
      for (int j = 0; j < kOneShotMaxRanks; ++j) {
        if (j < g.size)
          store_vec<T, kVec>(slot_row<T>(g.buffers[j], g, epoch, g.rank, k, p.hidden) + i * kVec,
                             v);
      }
    }
  }

  block_barrier(g.buffers, g.size, g.rank, kNormFlags, epoch, g.control);

  // 2. Sum the slots (local memory) in rank order, add, normalise.
  for (int64_t row = blockIdx.x, k = 0; row < p.rows; row += grid, ++k) {
    T* x = x_row(row);
    T* res = res_row(row);
    T* out = static_cast<T*>(p.out) + row * p.hidden;
    float sum_sq = 0.0f;
    Vec<T, kVec> sum_first = res_first;  // residual + x at the first vector
    for (int64_t i = first; i < num_vec; i += blockDim.x) {
      Vec<T, kVec> r =
          kCache && i == first ? res_first : load_vec_any<T, kVec, kAligned>(res + i * kVec);
      Vec<T, kVec> v[kOneShotMaxRanks];
#pragma unroll
      for (int j = 0; j < kOneShotMaxRanks; ++j) {
        if (j < g.size)
          v[j] = load_vec<T, kVec>(slot_row<T>(g.buffers[g.rank], g, epoch, j, k, p.hidden) +
                                   i * kVec);
      }
      const Vec<T, kVec> s = sum_in_rank_order<T, kVec>(v, g.size);
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
    return launch_kernel(oneshot_all_reduce_norm_kernel<T, kVec, true, 512>, blocks, threads, 0,
                         stream, p);
  if (vec && aligned)
    return launch_kernel(oneshot_all_reduce_norm_kernel<T, kVec, true, 1024>, blocks, threads, 0,
                         stream, p);
  if (vec)
    return launch_kernel(oneshot_all_reduce_norm_kernel<T, kVec, false, 1024>, blocks, threads, 0,
                         stream, p);
  return launch_kernel(oneshot_all_reduce_norm_kernel<T, 1, false, 1024>, blocks, threads, 0,
                       stream, p);
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
  if (g.protocol == OneShotProtocol::kPush &&
      oneshot_norm_fits(p.rows, p.hidden, p.dtype, push_capacity(g.capacity))) {
    return launch_push_all_reduce_norm(p, stream);
  }
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

}  // namespace pagoda::cuda
