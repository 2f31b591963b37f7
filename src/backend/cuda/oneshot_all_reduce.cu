#include "backend/cuda/oneshot_all_reduce.h"

#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/oneshot_protocol.cuh"
#include "backend/cuda/oneshot_push.cuh"

namespace pagoda::cuda {
namespace {

using namespace oneshot;

template <typename T>
__device__ __forceinline__ T* data_half(void* buffer, size_t capacity, uint32_t epoch) {
  return reinterpret_cast<T*>(static_cast<char*>(buffer) + kDataOffset + (epoch & 1u) * capacity);
}

// Sums element i (or vector i) over the ranks in rank order. All loads are
// issued before the first add (unrolled over the maximum rank count).
template <typename T, int kVec>
__device__ __forceinline__ Vec<T, kVec> sum_ranks(const OneShotParams& p, uint32_t epoch,
                                                  int64_t i) {
  Vec<T, kVec> v[kOneShotMaxRanks];
#pragma unroll
  for (int r = 0; r < kOneShotMaxRanks; ++r) {
    if (r < p.size) v[r] = load_vec<T, kVec>(data_half<T>(p.buffers[r], p.capacity, epoch) + i * kVec);
  }
  return sum_in_rank_order<T, kVec>(v, p.size);
}

// Work is split in units of one 16-byte vector (kVec elements), plus one
// last unit for the elements past the last whole vector, the same way on
// every rank whatever x's alignment (kAligned: x is 16-byte aligned, so its
// accesses are vectors too). Unit u always belongs to thread u % kThreads of
// block (u / kThreads) % kBlocks (never to gridDim: see oneshot_protocol.cuh),
// and the grid holds only the blocks that own units, so a small message
// costs one block's barrier instead of 32.
template <typename T, bool kAligned>
__global__ void __launch_bounds__(kOneShotThreads) oneshot_all_reduce_kernel(OneShotParams p) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int64_t kStride = int64_t{kOneShotBlocks} * kOneShotThreads;
  pdl_enter();  // the previous kernel on the stream (e.g. the last launch) is complete
  const uint32_t epoch = next_epoch(p.buffers[p.rank], kAllReduceCounters);

  T* x = static_cast<T*>(p.x);
  T* own = data_half<T>(p.buffers[p.rank], p.capacity, epoch);
  const int64_t num_vec = p.n / kVec;
  const bool has_tail = p.n % kVec != 0;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * kOneShotThreads + threadIdx.x;
  for (int64_t i = start; i < num_vec; i += kStride) {
    store_vec<T, kVec>(own + i * kVec, load_vec_any<T, kVec, kAligned>(x + i * kVec));
  }
  const bool tail_here = has_tail && start <= num_vec && (num_vec - start) % kStride == 0;
  if (tail_here) {
    for (int64_t e = num_vec * kVec; e < p.n; ++e) own[e] = x[e];
  }

  block_barrier(p.buffers, p.size, p.rank, kAllReduceFlags, epoch, p.control);

  for (int64_t i = start; i < num_vec; i += kStride) {
    store_vec_any<T, kVec, kAligned>(x + i * kVec, sum_ranks<T, kVec>(p, epoch, i));
  }
  if (tail_here) {
    for (int64_t e = num_vec * kVec; e < p.n; ++e) x[e] = sum_ranks<T, 1>(p, epoch, e).v[0];
  }
}

template <typename T>
cudaError_t launch_typed(const OneShotParams& p, cudaStream_t stream) {
  const bool aligned = reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  auto kernel = aligned ? oneshot_all_reduce_kernel<T, true> : oneshot_all_reduce_kernel<T, false>;
  constexpr int64_t kVec = 16 / sizeof(T);
  const int64_t units = ceil_div(p.n, kVec);
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>(kOneShotBlocks, ceil_div(units, kOneShotThreads)));
  return launch_kernel(kernel, dim3(blocks), dim3(kOneShotThreads), 0, stream, p);
}

// Fills `words` u32 words of a push region of `words_per_width` words per
// [family][width] block with the width's sentinels (widths alternate: 2, 4).
// Launched plainly (no PDL) on the allocation's stream.
__global__ void fill_push_sentinels_kernel(uint32_t* region, size_t words, size_t words_per_width) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const bool two_byte = (i / words_per_width) % 2 == 0;
    region[i] = two_byte ? 0x80008000u : 0x80000000u;  // -0.0 in bf16 / f16 pairs, f32
  }
}

}  // namespace

size_t oneshot_buffer_bytes(size_t capacity, int ranks) {
  capacity = (capacity + 15) / 16 * 16;
  return push_offset(capacity, ranks) + push_region_bytes(capacity, ranks);
}

size_t oneshot_push_capacity(size_t capacity) { return push_capacity((capacity + 15) / 16 * 16); }

cudaError_t init_oneshot_buffer(void* buffer, size_t capacity, int ranks, cudaStream_t stream) {
  capacity = (capacity + 15) / 16 * 16;
  const size_t offset = push_offset(capacity, ranks);
  cudaError_t e = cudaMemsetAsync(buffer, 0, offset, stream);
  if (e != cudaSuccess) return e;
  const size_t words = push_region_bytes(capacity, ranks) / 4;
  const size_t words_per_width = words / 4;  // [family 2][width 2]
  if (words == 0) return cudaSuccess;
  fill_push_sentinels_kernel<<<256, 256, 0, stream>>>(
      reinterpret_cast<uint32_t*>(static_cast<char*>(buffer) + offset), words, words_per_width);
  return cudaGetLastError();
}

cudaError_t launch_oneshot_all_reduce(const OneShotParams& p, cudaStream_t stream) {
  if (p.size < 2 || p.size > kOneShotMaxRanks || p.rank < 0 || p.rank >= p.size || p.n < 0 ||
      static_cast<size_t>(p.n) * dtype_size(p.dtype) > p.capacity || p.capacity % 16 != 0 ||
      p.control == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (p.n == 0) return cudaSuccess;
  if (p.protocol == OneShotProtocol::kPush &&
      static_cast<size_t>(p.n) * dtype_size(p.dtype) <= push_capacity(p.capacity)) {
    return launch_push_all_reduce(p, stream);
  }
  return dispatch_float(p.dtype,
                        [&](auto zero) { return launch_typed<decltype(zero)>(p, stream); });
}

}  // namespace pagoda::cuda
