#include "backend/cuda/oneshot_all_reduce.h"

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

constexpr size_t kFlagWords = size_t{kOneShotBlocks} * kOneShotMaxRanks;
// The data halves start 4 KiB in, so 16-byte vectors stay aligned.
constexpr size_t kDataOffset = 4096;
static_assert((kFlagWords + kOneShotBlocks) * sizeof(uint32_t) <= kDataOffset);

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint32_t load_relaxed_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t global_nanoseconds() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ bool reached(const uint32_t* flag, uint32_t epoch) {
  // Signed difference: counters wrap after 2^32 launches.
  return static_cast<int32_t>(load_acquire_sys(flag) - epoch) >= 0;
}

// Waits until `flag` reaches `epoch`, the group's abort word is set, or
// kOneShotWaitSeconds pass (then it sets the timed-out word). The control
// words live in host memory, so they are read only every 1024 polls.
__device__ __forceinline__ void wait_for_epoch(const uint32_t* flag, uint32_t epoch,
                                               OneShotControl* control) {
  if (reached(flag, epoch)) return;
  constexpr uint64_t kLimitNs = static_cast<uint64_t>(kOneShotWaitSeconds * 1e9);
  const uint64_t start = global_nanoseconds();
  for (uint32_t polls = 1;; ++polls) {
    if (reached(flag, epoch)) return;
    if (polls % 1024 != 0) continue;
    if (load_relaxed_sys(&control->aborted) != 0) return;
    if (global_nanoseconds() - start > kLimitNs) {
      atomicExch_system(&control->timed_out, 1u);
      return;
    }
  }
}

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
  float acc[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) acc[k] = 0.0f;
#pragma unroll
  for (int r = 0; r < kOneShotMaxRanks; ++r) {
    if (r < p.size) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc[k] += to_float(v[r].v[k]);
    }
  }
  Vec<T, kVec> out;
#pragma unroll
  for (int k = 0; k < kVec; ++k) out.v[k] = from_float<T>(acc[k]);
  return out;
}

template <typename T, int kVec, bool kAligned>
__device__ __forceinline__ Vec<T, kVec> load_x(const T* p) {
  if constexpr (kAligned) {
    return load_vec<T, kVec>(p);
  } else {
    Vec<T, kVec> v;
#pragma unroll
    for (int k = 0; k < kVec; ++k) v.v[k] = p[k];
    return v;
  }
}

template <typename T, int kVec, bool kAligned>
__device__ __forceinline__ void store_x(T* p, const Vec<T, kVec>& v) {
  if constexpr (kAligned) {
    store_vec<T, kVec>(p, v);
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) p[k] = v.v[k];
  }
}

// Work is split in 16-byte vectors (kVec elements) and then the elements past
// the last whole vector, the same way on every rank whatever x's alignment
// (kAligned: x is 16-byte aligned, so its accesses are vectors too).
template <typename T, bool kAligned>
__global__ void __launch_bounds__(kOneShotThreads) oneshot_all_reduce_kernel(OneShotParams p) {
  constexpr int kVec = 16 / sizeof(T);
  pdl_enter();  // the previous kernel on the stream (e.g. the last launch) is complete
  uint32_t* own_flags = static_cast<uint32_t*>(p.buffers[p.rank]);
  uint32_t* counter = own_flags + kFlagWords + blockIdx.x;
  __shared__ uint32_t shared_epoch;
  if (threadIdx.x == 0) {
    shared_epoch = *counter + 1;
    *counter = shared_epoch;
  }
  __syncthreads();
  const uint32_t epoch = shared_epoch;

  T* x = static_cast<T*>(p.x);
  T* own = data_half<T>(p.buffers[p.rank], p.capacity, epoch);
  const int64_t num_vec = p.n / kVec;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = start; i < num_vec; i += stride) {
    store_vec<T, kVec>(own + i * kVec, load_x<T, kVec, kAligned>(x + i * kVec));
  }
  for (int64_t i = num_vec * kVec + start; i < p.n; i += stride) own[i] = x[i];

  // Barrier of block b over the ranks. The bar.sync orders the block's
  // stores before thread j's release; thread j's acquire, then the second
  // bar.sync, order rank j's stores before every thread's loads.
  __syncthreads();
  if (threadIdx.x < p.size) {
    const int j = threadIdx.x;
    uint32_t* remote = static_cast<uint32_t*>(p.buffers[j]) + blockIdx.x * kOneShotMaxRanks;
    store_release_sys(remote + p.rank, epoch);
    wait_for_epoch(own_flags + blockIdx.x * kOneShotMaxRanks + j, epoch, p.control);
  }
  __syncthreads();

  for (int64_t i = start; i < num_vec; i += stride) {
    store_x<T, kVec, kAligned>(x + i * kVec, sum_ranks<T, kVec>(p, epoch, i));
  }
  for (int64_t i = num_vec * kVec + start; i < p.n; i += stride) {
    x[i] = sum_ranks<T, 1>(p, epoch, i).v[0];
  }
}

template <typename T>
cudaError_t launch_typed(const OneShotParams& p, cudaStream_t stream) {
  const bool aligned = reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  auto kernel = aligned ? oneshot_all_reduce_kernel<T, true> : oneshot_all_reduce_kernel<T, false>;
  return launch_kernel(kernel, dim3(kOneShotBlocks), dim3(kOneShotThreads), 0, stream, p);
}

}  // namespace

size_t oneshot_buffer_bytes(size_t capacity) {
  capacity = (capacity + 15) / 16 * 16;
  return kDataOffset + 2 * capacity;
}

cudaError_t launch_oneshot_all_reduce(const OneShotParams& p, cudaStream_t stream) {
  if (p.size < 2 || p.size > kOneShotMaxRanks || p.rank < 0 || p.rank >= p.size || p.n < 0 ||
      static_cast<size_t>(p.n) * dtype_size(p.dtype) > p.capacity || p.capacity % 16 != 0 ||
      p.control == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (p.n == 0) return cudaSuccess;
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
