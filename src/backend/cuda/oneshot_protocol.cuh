// The peer-memory protocol the one-shot collectives share
// (oneshot_all_reduce.h): the layout of a rank's peer buffer, the per-block
// epoch counters and the per-block barrier over the ranks. Included only by
// the one-shot .cu files.
//
// Peer buffer layout (oneshot_buffer_bytes(capacity, size)), u32 words first:
//   [0, 256)    all-reduce flags   [kOneShotBlocks][kOneShotMaxRanks]
//   [256, 288)  all-reduce counters [kOneShotBlocks]
//   [288, 544)  fused-norm flags   [kOneShotBlocks][kOneShotMaxRanks]
//   [544, 576)  fused-norm counters [kOneShotBlocks]
//   [576, 608)  push all-reduce counters [kOneShotBlocks]
//   [608, 640)  push fused-norm counters [kOneShotBlocks]
//   bytes [4096, 4096 + 2 capacity)         all-reduce data, 2 halves
//   bytes [.., + 2 size capacity)           fused-norm data, 2 halves of one
//     `capacity` slot per source rank, each cut in kOneShotBlocks regions
//   bytes [.., + 12 size push_capacity)     the push protocol's stages
//     (oneshot_push.cuh), filled with its sentinels instead of zeros
// Each kernel family has its own flags, counters and data, so a rank that
// runs ahead into the other family's kernel never writes memory a slower
// peer still reads. Within a family, every byte of a data half is always
// read and written by the same block index (whatever the message size), so
// the per-block epochs' parity keeps a fast rank's next launch in the other
// half (see oneshot_all_reduce.h).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/oneshot_all_reduce.h"

namespace pagoda::cuda::oneshot {

constexpr uint32_t kFlagWords = uint32_t{kOneShotBlocks} * kOneShotMaxRanks;
constexpr uint32_t kAllReduceFlags = 0;
constexpr uint32_t kAllReduceCounters = kAllReduceFlags + kFlagWords;
constexpr uint32_t kNormFlags = kAllReduceCounters + kOneShotBlocks;
constexpr uint32_t kNormCounters = kNormFlags + kFlagWords;
constexpr uint32_t kPushCounters = kNormCounters + kOneShotBlocks;
constexpr uint32_t kPushNormCounters = kPushCounters + kOneShotBlocks;
// The data start 4 KiB in, so 16-byte vectors stay aligned.
constexpr size_t kDataOffset = 4096;
static_assert((kPushNormCounters + kOneShotBlocks) * sizeof(uint32_t) <= kDataOffset);

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

// A thread's bounded wait for its peers: call exhausted() after each poll
// that found the peers' data missing; it turns true (and stays true) once the
// group's abort word is set or kOneShotWaitSeconds passed since the first
// such poll (then it sets the timed-out word). The control words live in host
// memory, so they are read only every 1024 polls.
struct PollBudget {
  OneShotControl* control;
  uint64_t start = 0;
  uint32_t polls = 0;
  bool gave_up = false;

  __device__ __forceinline__ explicit PollBudget(OneShotControl* c) : control(c) {}

  __device__ __forceinline__ bool exhausted() {
    constexpr uint64_t kLimitNs = static_cast<uint64_t>(kOneShotWaitSeconds * 1e9);
    if (gave_up) return true;
    if (polls++ == 0) start = global_nanoseconds();
    if (polls % 1024 != 0) return false;
    if (load_relaxed_sys(&control->aborted) != 0) {
      gave_up = true;
    } else if (global_nanoseconds() - start > kLimitNs) {
      atomicExch_system(&control->timed_out, 1u);
      gave_up = true;
    }
    return gave_up;
  }
};

// Waits until `flag` reaches `epoch`, or the wait's budget runs out.
__device__ __forceinline__ void wait_for_epoch(const uint32_t* flag, uint32_t epoch,
                                               OneShotControl* control) {
  PollBudget budget(control);
  while (!reached(flag, epoch) && !budget.exhausted()) {
  }
}

// This block's next epoch of the family whose counters start at word
// `counters` of the own buffer (advanced here, so graph replays keep
// counting). Call from every thread of the block.
__device__ __forceinline__ uint32_t next_epoch(void* own_buffer, uint32_t counters) {
  __shared__ uint32_t shared_epoch;
  uint32_t* counter = static_cast<uint32_t*>(own_buffer) + counters + blockIdx.x;
  if (threadIdx.x == 0) {
    shared_epoch = *counter + 1;
    *counter = shared_epoch;
  }
  __syncthreads();
  return shared_epoch;
}

// Block b's barrier over the ranks for the family whose flags start at word
// `flags`: every store the block made before it (to any rank's buffer) is
// visible to block b of every rank after it. The bar.sync orders the block's
// stores before thread j's release to rank j; thread j's acquire of rank j's
// flag, then the second bar.sync, order rank j's stores before every
// thread's later loads. blockDim.x >= size.
__device__ __forceinline__ void block_barrier(void* const* buffers, int size, int rank,
                                              uint32_t flags, uint32_t epoch,
                                              OneShotControl* control) {
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < size) {
    const int j = threadIdx.x;
    const uint32_t block_flags = flags + blockIdx.x * kOneShotMaxRanks;
    store_release_sys(static_cast<uint32_t*>(buffers[j]) + block_flags + rank, epoch);
    wait_for_epoch(static_cast<uint32_t*>(buffers[rank]) + block_flags + j, epoch, control);
  }
  __syncthreads();
}

// The sum of the ranks' vectors v[0 .. size) in rank order with f32
// accumulation, rounded once: every rank, and both the plain and the fused
// all-reduce, compute the same bits. v holds kOneShotMaxRanks entries (loaded
// before the first add); those from `size` on are not read.
template <typename T, int kVec>
__device__ __forceinline__ Vec<T, kVec> sum_in_rank_order(const Vec<T, kVec> (&v)[kOneShotMaxRanks],
                                                          int size) {
  float acc[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) acc[e] = 0.0f;
#pragma unroll
  for (int r = 0; r < kOneShotMaxRanks; ++r) {
    if (r < size) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] += to_float(v[r].v[e]);
    }
  }
  Vec<T, kVec> out;
#pragma unroll
  for (int e = 0; e < kVec; ++e) out.v[e] = from_float<T>(acc[e]);
  return out;
}

// The fused kernels' data: bytes of one block's region in a source rank's
// slot of `capacity` bytes (a 16-byte multiple).
__host__ __device__ inline size_t region_bytes(size_t capacity) {
  return capacity / kOneShotBlocks / 16 * 16;
}

// block_sum (cuda_common.cuh) with the same bits (the same butterflies in
// the same order) but one __syncthreads instead of two: consecutive calls of
// a block alternate between two partial arrays (`parity`: the call's index &
// 1). A thread writes partial[parity] in call k + 2 only after passing call
// k + 1's barrier, which every thread reaches only after its reads of call
// k, so no write meets an earlier call's reads. blockDim.x a multiple of 32.
__device__ __forceinline__ float block_sum_alternating(float x, uint32_t parity) {
  __shared__ float partial[2][32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int num_warps = blockDim.x >> 5;
  x = warp_sum(x);
  if (lane == 0) partial[parity][warp] = x;
  __syncthreads();
  x = lane < num_warps ? partial[parity][lane] : 0.0f;
  return warp_sum(x);
}

// The fused kernels' threads per block for a row of `hidden` elements in
// steps of `vec`: launch_rms_norm's count for the same step, so each
// thread's partial sum of squares, and the block's sum of them, are the
// unfused kernel's bits.
inline int norm_threads(int64_t hidden, int vec) {
  const int64_t num_vec = hidden / vec;
  return static_cast<int>(num_vec >= 1024 ? 1024 : ceil_div(num_vec, 32) * 32);
}

// The fused kernels' normalisation, as norm_kernels.cu: y = round(x * inv),
// then round(y * w).
template <typename T>
__device__ __forceinline__ T norm_apply(float x, float inv, T w) {
  const T y = from_float<T>(x * inv);
  return from_float<T>(to_float(y) * to_float(w));
}

// Calls f(T{}) with T the CUDA type of an f32, bf16 or f16 dtype (the
// one-shot kernels' dtypes), as dispatch_half; cudaErrorInvalidValue for
// other dtypes.
template <typename F>
cudaError_t dispatch_float(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(float{});
    case DType::kBF16: return f(bf16{});
    case DType::kF16: return f(f16{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace pagoda::cuda::oneshot
