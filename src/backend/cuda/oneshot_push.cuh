// The "push + Lamport" protocol of the one-shot collectives
// (oneshot_all_reduce.h: OneShotProtocol::kPush): no flags, no barrier.
// Included only by the one-shot .cu files.
//
// Stages. The push region of a rank's peer buffer (after the barrier
// protocol's data, oneshot_protocol.cuh) holds, per kernel family (the plain
// all-reduce; the fused all-reduce + add + RMSNorm) and per element width
// (2 bytes: bf16 and f16; 4 bytes: f32), 3 stages of `size` slots of
// push_capacity bytes:
//   [family 2][width 2][stage 3][slot size][push_capacity bytes]
// Every element of every stage holds the width's sentinel, -0.0 (bf16 and
// f16 0x8000, f32 0x80000000), except while an epoch that uses it is in
// flight. Epoch e of a block (the block's e-th launch of the family) uses
// stage e % 3; the per-block counter in the buffer holds that stage itself,
// advanced modulo 3 by the kernel (so graph replays keep counting, and no
// 2^32 wrap breaks the rotation).
//
// One epoch of block b on rank A (every byte offset of a stage is always
// handled by the same block index, whatever the message size, as in the
// barrier protocol):
//   1. push: A stores its slice of x, with every -0.0 written as +0.0, into
//      slot[A] of stage e % 3 of EVERY rank's buffer (its own included) with
//      16-byte stores (remote ones over NVLink);
//   2. A polls its LOCAL stage e % 3 (volatile loads) until no element of
//      its slice is the sentinel in any rank's slot, then sums the slots in
//      rank order with f32 accumulation (sum_in_rank_order: the same bits on
//      every rank; +0.0 for -0.0 changes no sum, whose f32 accumulator starts
//      at +0.0 and so is never -0.0);
//   3. A writes the sentinel back over the slice of every slot it consumed.
// A store is single-copy atomic per element only, so every element is
// checked, not one per vector.
//
// Invariant: when rank A's block b stores into stage s of rank B's buffer
// (epoch e, s = e % 3), B's block b has finished epoch e - 2, so its reset of
// stage s at epoch e - 3 is complete. Proof: A reached epoch e after block b
// finished epoch e - 1 on A, which needed B's epoch-(e - 1) data; B's block b
// pushes that data only in the launch after the one of its epoch e - 2, and
// launches on a stream run one after the other (pdl_enter waits for the
// predecessor's completion and memory flush before any access). Two stages
// would already keep the new stores out of a stage B still reads; the third
// puts a whole kernel of B between its reset of a stage and anyone's next
// store into it. Each family and width has its own stages, so a rank that
// runs ahead into the other family, or another dtype's width, never touches
// memory a slower peer still reads.
//
// Waits are bounded (PollBudget): on an abort or after kOneShotWaitSeconds a
// thread stops waiting, x is left unspecified, the stages may keep stale
// data, and the group is unusable from then on (the host reports it).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/oneshot_all_reduce.h"
#include "backend/cuda/oneshot_protocol.cuh"

namespace pagoda::cuda::oneshot {

constexpr int kPushStages = 3;
enum PushFamily : int { kPushAllReduce = 0, kPushNorm = 1 };

// Bytes of one push slot for a barrier capacity of `capacity` (16-byte multiple).
__host__ __device__ inline size_t push_capacity(size_t capacity) {
  return capacity < kOneShotPushMaxBytes ? capacity : kOneShotPushMaxBytes;
}

// Where the push region starts in a buffer of `capacity`-byte halves.
__host__ __device__ inline size_t push_offset(size_t capacity, int size) {
  return kDataOffset + 2 * capacity + 2 * static_cast<size_t>(size) * capacity;
}

// Bytes of the push region: [family 2][width 2][stage 3][slot size].
__host__ __device__ inline size_t push_region_bytes(size_t capacity, int size) {
  return size_t{2} * 2 * kPushStages * static_cast<size_t>(size) * push_capacity(capacity);
}

// This block's stage for its next launch of the family whose counters start
// at word `counters` of the own buffer: (last stage + 1) % kPushStages,
// stored back. Call from every thread of the block.
__device__ __forceinline__ uint32_t next_stage(void* own_buffer, uint32_t counters) {
  __shared__ uint32_t shared_stage;
  uint32_t* counter = static_cast<uint32_t*>(own_buffer) + counters + blockIdx.x;
  if (threadIdx.x == 0) {
    shared_stage = (*counter + 1) % kPushStages;
    *counter = shared_stage;
  }
  __syncthreads();
  return shared_stage;
}

// Slot `src` of stage `stage` (0..2) for family `family` and T's width in
// `buffer` (a rank's peer buffer; g gives capacity and size).
template <typename T>
__device__ __forceinline__ T* push_slot(void* buffer, const OneShotParams& g, int family,
                                        uint32_t stage, int src) {
  constexpr int kWidth = sizeof(T) == 2 ? 0 : 1;
  const size_t slot = push_capacity(g.capacity);
  const size_t index = ((static_cast<size_t>(family) * 2 + kWidth) * kPushStages + stage) *
                           static_cast<size_t>(g.size) +
                       static_cast<size_t>(src);
  return reinterpret_cast<T*>(static_cast<char*>(buffer) + push_offset(g.capacity, g.size) +
                              index * slot);
}

// The element type's sentinel, -0.0 (bf16 and f16 0x8000, f32 0x80000000).
__device__ __forceinline__ bool is_sentinel(bf16 v) {
  return __bfloat16_as_ushort(v) == 0x8000;
}
__device__ __forceinline__ bool is_sentinel(f16 v) {
  return __half_as_ushort(v) == 0x8000;
}
__device__ __forceinline__ bool is_sentinel(float v) {
  return __float_as_uint(v) == 0x80000000u;
}

template <typename T>
__device__ __forceinline__ T sentinel();
template <>
__device__ __forceinline__ bf16 sentinel<bf16>() {
  return __ushort_as_bfloat16(0x8000);
}
template <>
__device__ __forceinline__ f16 sentinel<f16>() {
  return __ushort_as_half(0x8000);
}
template <>
__device__ __forceinline__ float sentinel<float>() {
  return __uint_as_float(0x80000000u);
}

// v with every -0.0 replaced by +0.0 (what a writer pushes).
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> without_sentinels(Vec<T, N> v) {
#pragma unroll
  for (int e = 0; e < N; ++e) {
    if (is_sentinel(v.v[e])) v.v[e] = from_float<T>(0.0f);
  }
  return v;
}

template <typename T, int N>
__device__ __forceinline__ bool complete(const Vec<T, N>& v) {
  bool ok = true;
#pragma unroll
  for (int e = 0; e < N; ++e) ok = ok && !is_sentinel(v.v[e]);
  return ok;
}

template <typename T, int N>
__device__ __forceinline__ Vec<T, N> sentinel_vec() {
  Vec<T, N> v;
#pragma unroll
  for (int e = 0; e < N; ++e) v.v[e] = sentinel<T>();
  return v;
}

// A Vec and its raw bits, for the volatile accesses.
template <typename T, int N>
union VecBits {
  static constexpr int kBytes = sizeof(Vec<T, N>);
  static_assert(kBytes == 16 || kBytes == 4 || kBytes == 2);
  using Word = std::conditional_t<kBytes == 16, uint4,
                                  std::conditional_t<kBytes == 4, uint32_t, unsigned short>>;
  Vec<T, N> vec;
  Word bits;
};

// Volatile (relaxed, system scope) accesses of one Vec (16, 4 or 2 bytes):
// never cached in L1 or registers, so a poll sees a peer's later stores.
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_volatile(const T* p) {
  VecBits<T, N> u;
  if constexpr (sizeof(u.bits) == 16) {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(u.bits.x), "=r"(u.bits.y), "=r"(u.bits.z), "=r"(u.bits.w)
                 : "l"(p)
                 : "memory");
  } else if constexpr (sizeof(u.bits) == 4) {
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(u.bits) : "l"(p) : "memory");
  } else {
    asm volatile("ld.volatile.global.u16 %0, [%1];" : "=h"(u.bits) : "l"(p) : "memory");
  }
  return u.vec;
}

template <typename T, int N>
__device__ __forceinline__ void store_volatile(T* p, const Vec<T, N>& v) {
  VecBits<T, N> u;
  u.vec = v;
  if constexpr (sizeof(u.bits) == 16) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u.bits.x),
                 "r"(u.bits.y), "r"(u.bits.z), "r"(u.bits.w)
                 : "memory");
  } else if constexpr (sizeof(u.bits) == 4) {
    asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(p), "r"(u.bits) : "memory");
  } else {
    asm volatile("st.volatile.global.u16 [%0], %1;" ::"l"(p), "h"(u.bits) : "memory");
  }
}

// Step 1 for one vector: v (sentinels replaced) into slot `src` = g.rank at
// element offset `at` of every rank's stage.
template <typename T, int N>
__device__ __forceinline__ void push_vec(const OneShotParams& g, int family, uint32_t stage,
                                         size_t at, const Vec<T, N>& v) {
  const Vec<T, N> clean = without_sentinels(v);
#pragma unroll
  for (int j = 0; j < kOneShotMaxRanks; ++j) {
    if (j < g.size)
      store_volatile<T, N>(push_slot<T>(g.buffers[j], g, family, stage, g.rank) + at, clean);
  }
}

// Steps 2 and 3 for one vector: waits until every rank's slot holds the
// vector at element offset `at` of the own stage, resets them to the
// sentinel and returns their sum in rank order. When the budget runs out it
// returns an unspecified vector at once (and leaves the slots as they are).
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> collect_vec(const OneShotParams& g, int family, uint32_t stage,
                                                 size_t at, PollBudget& budget) {
  void* own = g.buffers[g.rank];
  // Every poll reloads every rank's vector (local loads, issued together),
  // so nothing but the budget lives across polls.
  for (;;) {
    Vec<T, N> v[kOneShotMaxRanks];
    bool all = true;
#pragma unroll
    for (int r = 0; r < kOneShotMaxRanks; ++r) {
      if (r < g.size) v[r] = load_volatile<T, N>(push_slot<T>(own, g, family, stage, r) + at);
    }
#pragma unroll
    for (int r = 0; r < kOneShotMaxRanks; ++r) {
      if (r < g.size) all = all && complete(v[r]);
    }
    if (all) {
      const Vec<T, N> empty = sentinel_vec<T, N>();
#pragma unroll
      for (int r = 0; r < kOneShotMaxRanks; ++r) {
        if (r < g.size) store_volatile<T, N>(push_slot<T>(own, g, family, stage, r) + at, empty);
      }
      return sum_in_rank_order<T, N>(v, g.size);
    }
    if (budget.exhausted()) return v[0];
  }
}

// The plain all-reduce on the push protocol (oneshot_push_all_reduce.cu),
// called by launch_oneshot_all_reduce once it validated the parameters and
// chose the protocol. (The fused kernel's push side is PushSum in
// oneshot_all_reduce_norm.cu.)
cudaError_t launch_push_all_reduce(const OneShotParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda::oneshot
