// The CTAs of one logits row (a "group" of G CTAs, each owning a contiguous
// chunk of the vocabulary) and the row-wide operations built on them:
// reductions combined in group order, an exclusive prefix over the chunks,
// and the radix select of sampling_block.cuh over the whole row.
//
// Determinism: every cross-CTA combination reads the G published values in
// the order g = 0..G-1, in every CTA, so all CTAs of a row get the same bits
// and a launch with the same inputs and G repeats them. With G == 1 no
// global memory is touched and the operations reduce to the block ones.
//
// Co-residency: the CTAs of a row wait for each other (a spin barrier on a
// per-row counter), so a launch with G > 1 must have all its CTAs resident
// at once (launch_sample keeps rows * G within the device's occupancy); a
// barrier still waiting after 10 s traps rather than hang.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "backend/cuda/sampling_block.cuh"

namespace pagoda::cuda::sampling {

// Global scratch of a launch with G > 1 (SampleParams::group_*): counters
// [rows][2] (arrivals, departures; zero before and after every launch),
// values [rows * G][2] (one 16-byte value per CTA per barrier parity),
// hist [rows * G][2][256] f64 and top [rows][kMaxTopLogprobs] (key, id).
// Most CTAs in a row's group (sampling_kernels.h's kMaxSampleGroups).
constexpr int kMaxGroupSize = 64;

struct RowGroup {
  int g = 0;       // this CTA's chunk
  int size = 1;    // G
  int64_t lo = 0;  // the chunk: tokens [lo, hi)
  int64_t hi = 0;
  unsigned epoch = 0;            // barriers passed
  unsigned* counters = nullptr;  // the row's [2]
  uint4* values = nullptr;       // the row's [G][2]
  double* hist = nullptr;        // the row's [G][2][256]
  uint2* top = nullptr;          // the row's [kMaxTopLogprobs]
};

// A barrier that waits this long has lost the co-residency it relies on;
// the kernel traps (a launch error the backend reports) instead of hanging.
constexpr uint64_t kBarrierTimeoutNs = 10'000'000'000ull;

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Waits until every CTA of the row has arrived (all their earlier global
// writes visible). Call from all threads of every CTA of the row, the same
// number of times.
__device__ __forceinline__ void group_barrier(RowGroup& rg) {
  ++rg.epoch;
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned target = rg.epoch * static_cast<unsigned>(rg.size);
    __threadfence();
    atomicAdd(&rg.counters[0], 1u);
    const uint64_t start = global_timer_ns();
    while (*static_cast<volatile unsigned*>(&rg.counters[0]) < target) {
      if (global_timer_ns() - start > kBarrierTimeoutNs) __trap();
    }
    __threadfence();
  }
  __syncthreads();
}

// End of the kernel: the last CTA of the row to leave zeroes the counters
// (every other CTA has passed its last barrier by then).
__device__ __forceinline__ void group_finish(RowGroup& rg) {
  if (rg.size == 1) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&rg.counters[1], 1u) == static_cast<unsigned>(rg.size) - 1) {
      rg.counters[0] = 0;
      rg.counters[1] = 0;
      __threadfence();
    }
  }
}

template <typename T>
__device__ __forceinline__ uint4 to_slot(T v) {
  static_assert(sizeof(T) <= sizeof(uint4));
  uint4 s = make_uint4(0, 0, 0, 0);
  memcpy(&s, &v, sizeof(T));
  return s;
}

template <typename T>
__device__ __forceinline__ T from_slot(uint4 s) {
  T v;
  memcpy(&v, &s, sizeof(T));
  return v;
}

// Block-shared staging of the G published values of one exchange.
__device__ __forceinline__ uint4* group_staging() {
  __shared__ uint4 staged[kMaxGroupSize];
  return staged;
}

// Publishes this CTA's v (the same in all its threads), waits for the row
// and stages the G values of the exchange in shared memory (loaded in
// parallel).
template <typename T>
__device__ __forceinline__ uint4* group_exchange(RowGroup& rg, T v) {
  const unsigned parity = rg.epoch & 1u;
  if (threadIdx.x == 0) rg.values[2 * rg.g + parity] = to_slot(v);
  group_barrier(rg);
  uint4* staged = group_staging();
  if (threadIdx.x < rg.size) staged[threadIdx.x] = __ldcg(&rg.values[2 * threadIdx.x + parity]);
  __syncthreads();  // the next writer of `staged` passes a barrier first
  return staged;
}

// Publishes this CTA's value v (the same in all its threads) and returns
// v_0 op v_1 op ... op v_{G-1} (left to right) in every thread of the row.
template <typename T, typename Op>
__device__ __forceinline__ T group_reduce(RowGroup& rg, T v, Op op) {
  if (rg.size == 1) return v;
  const uint4* staged = group_exchange(rg, v);
  T r = from_slot<T>(staged[0]);
  for (int j = 1; j < rg.size; ++j) r = op(r, from_slot<T>(staged[j]));
  return r;
}

// Publishes this CTA's v and returns the sum of the values of the chunks
// before it (0 for the first), added in chunk order.
__device__ __forceinline__ double group_exclusive_sum(RowGroup& rg, double v) {
  if (rg.size == 1) return 0.0;
  const uint4* staged = group_exchange(rg, v);
  double before = 0.0;
  for (int j = 0; j < rg.g; ++j) before += from_slot<double>(staged[j]);
  return before;
}

// sh.hist holds this CTA's histogram; afterwards it holds the row's (each
// bin summed in chunk order; the loads batched 8 at a time).
__device__ __forceinline__ void group_histogram(RowGroup& rg, SelectShared& sh) {
  if (rg.size == 1) return;
  const unsigned parity = rg.epoch & 1u;
  double* mine = rg.hist + (2 * rg.g + parity) * 256;
  for (int i = threadIdx.x; i < 256; i += kThreads) mine[i] = sh.hist[i];
  group_barrier(rg);
  for (int i = threadIdx.x; i < 256; i += kThreads) {
    double s = 0.0;
    for (int j0 = 0; j0 < rg.size; j0 += 8) {
      double v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int j = j0 + k;
        v[k] = j < rg.size ? __ldcg(&rg.hist[(2 * j + parity) * 256 + i]) : 0.0;
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) s += v[k];  // + 0.0 past G: exact (weights are >= 0)
    }
    sh.hist[i] = s;
  }
  __syncthreads();
}

struct BestOp {
  __device__ __forceinline__ Candidate operator()(Candidate a, Candidate b) const {
    return better(a, b);
  }
};
struct MinOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

// A logits row as the sampling steps read it: a[t], or -inf where an
// allowed-token mask is given and clears bit t & 31 of word t >> 5
// (SamplingBatch's layout). A mask-only row is read this way, the mask
// applied on every read, instead of being copied into scratch first; a
// plain pointer converts to an unmasked RowRef.
struct RowRef {
  const float* a = nullptr;
  const uint32_t* allowed = nullptr;  // null: every token allowed

  __device__ RowRef(const float* row, const uint32_t* mask = nullptr) : a(row), allowed(mask) {}
  // v (= a[t]) as read through the mask.
  __device__ __forceinline__ float masked(int64_t t, float v) const {
    return allowed == nullptr || ((__ldg(&allowed[t >> 5]) >> (t & 31)) & 1u) != 0 ? v
                                                                                    : -INFINITY;
  }
  __device__ __forceinline__ float operator[](int64_t t) const { return masked(t, a[t]); }
  // Whether this reads exactly the row x (no mask).
  __device__ __forceinline__ bool is(const float* x) const { return a == x && allowed == nullptr; }
};

// Tokens per thread whose loads a sweep issues together (memory-level
// parallelism: one CTA per SM holds too few warps to cover DRAM latency with
// one load per thread in flight).
constexpr int kSweepUnroll = 8;

// Calls f(t, a[t]) for every token t of the CTA's chunk, in each thread the
// order of the plain stride loop (t = lo + tid, then + kThreads, ...), so
// per-thread sums are the same bits; the loads of kSweepUnroll tokens are
// issued before the first call (a mask's words are read after them, from
// L1 mostly: one word serves a warp's 32 tokens). Not warp-uniform at the
// chunk's end.
template <typename F>
__device__ __forceinline__ void sweep(const RowGroup& rg, RowRef a, F f) {
  constexpr int64_t kStep = static_cast<int64_t>(kSweepUnroll) * kThreads;
  int64_t t = rg.lo + threadIdx.x;
  for (; t + (kSweepUnroll - 1) * kThreads < rg.hi; t += kStep) {
    float v[kSweepUnroll];
#pragma unroll
    for (int k = 0; k < kSweepUnroll; ++k) v[k] = a.a[t + k * kThreads];
#pragma unroll
    for (int k = 0; k < kSweepUnroll; ++k) f(t + k * kThreads, a.masked(t + k * kThreads, v[k]));
  }
  for (; t < rg.hi; t += kThreads) f(t, a[t]);
}

// sweep() with 16-byte loads when a + lo is 16-byte aligned (else sweep()):
// thread i takes the float4s i, i + kThreads, ... of the chunk, four of them
// loaded together, then the chunk's last (< 4) tokens one per thread; each
// thread still visits its tokens in increasing id order (its f64 partial
// sums differ from sweep()'s, which visits other tokens).
template <typename F>
__device__ __forceinline__ void sweep_vec4(const RowGroup& rg, RowRef a, F f) {
  if ((reinterpret_cast<uintptr_t>(a.a + rg.lo) & 15u) != 0) {
    sweep(rg, a, f);
    return;
  }
  constexpr int kUnroll = 4;
  const int64_t n4 = (rg.hi - rg.lo) >> 2;
  const float4* a4 = reinterpret_cast<const float4*>(a.a + rg.lo);
  auto visit4 = [&](int64_t i, float4 v) {
    const int64_t t = rg.lo + 4 * i;
    f(t, a.masked(t, v.x));
    f(t + 1, a.masked(t + 1, v.y));
    f(t + 2, a.masked(t + 2, v.z));
    f(t + 3, a.masked(t + 3, v.w));
  };
  int64_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < n4; i += static_cast<int64_t>(kUnroll) * kThreads) {
    float4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = a4[i + k * kThreads];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) visit4(i + k * kThreads, v[k]);
  }
  for (; i < n4; i += kThreads) visit4(i, a4[i]);
  for (int64_t t = rg.lo + 4 * n4 + threadIdx.x; t < rg.hi; t += kThreads) f(t, a[t]);
}

// sweep() over two rows of the same tokens: f(t, a[t], b[t]).
template <typename F>
__device__ __forceinline__ void sweep2(const RowGroup& rg, RowRef a, RowRef b, F f) {
  constexpr int kUnroll = kSweepUnroll / 2;
  constexpr int64_t kStep = static_cast<int64_t>(kUnroll) * kThreads;
  int64_t t = rg.lo + threadIdx.x;
  for (; t + (kUnroll - 1) * kThreads < rg.hi; t += kStep) {
    float va[kUnroll], vb[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      va[k] = a.a[t + k * kThreads];
      vb[k] = b.a[t + k * kThreads];
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t tk = t + k * kThreads;
      f(tk, a.masked(tk, va[k]), b.masked(tk, vb[k]));
    }
  }
  for (; t < rg.hi; t += kThreads) f(t, a[t], b[t]);
}

// Warp-uniform sweep: f(t, valid, a[t]) over slabs of kThreads tokens from
// rg.lo, every thread of the block the same number of calls (valid false,
// value 0, past rg.hi); kSweepUnroll slabs' loads issued together. f may use
// warp collectives (not block barriers).
template <typename F>
__device__ __forceinline__ void sweep_uniform(const RowGroup& rg, RowRef a, F f) {
  constexpr int64_t kStep = static_cast<int64_t>(kSweepUnroll) * kThreads;
  for (int64_t base = rg.lo; base < rg.hi; base += kStep) {
    float v[kSweepUnroll];
#pragma unroll
    for (int k = 0; k < kSweepUnroll; ++k) {
      const int64_t t = base + k * kThreads + threadIdx.x;
      v[k] = t < rg.hi ? a.a[t] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kSweepUnroll; ++k) {
      const int64_t t = base + k * kThreads + threadIdx.x;
      f(t, t < rg.hi, t < rg.hi ? a.masked(t, v[k]) : 0.0f);
    }
  }
}

// The row's best candidate (higher score, then lower id) given each thread's.
__device__ __forceinline__ Candidate group_best(RowGroup& rg, Candidate c) {
  return group_reduce(rg, block_best(c), BestOp{});
}

// op over the row given each thread's value.
template <typename T, typename Op>
__device__ __forceinline__ T row_reduce(RowGroup& rg, T v, Op op) {
  return group_reduce(rg, block_reduce(v, op), op);
}

// Finds the threshold of the first tokens, in (value desc, id asc) order
// among the row's eligible tokens, whose summed weight reaches `target`
// (> 0). fn(t, a_t, &key, &weight), given token t and a[t], returns whether
// t is eligible and sets its order key and weight (1 for counting); it is
// called for the CTA's own chunk only. When the eligible total stays below
// target every eligible token is selected. Call from all threads of the row;
// fn must give every thread the same answer for the same token. Histograms
// are per warp (sampling_block.cuh's warp_hist_add), merged in warp order,
// so a launch repeats its bits.
template <typename Fn>
__device__ Threshold group_select(Fn fn, RowRef a, RowGroup& rg, double target,
                                  SelectShared& sh) {
  uint32_t prefix = 0, mask = 0;
  double remaining = target;
  double* const my_hist = sh.warp_hist[threadIdx.x >> 5];
  for (int i = threadIdx.x; i < kWarps * 256; i += kThreads) (&sh.warp_hist[0][0])[i] = 0.0;
  __syncthreads();
  for (int shift = 24; shift >= 0; shift -= 8) {
    sweep_uniform(rg, a, [&](int64_t t, bool valid, float v) {
      uint32_t key = 0;
      double w = 0.0;
      const bool add = valid && fn(t, v, key, w) && (key & mask) == prefix;
      warp_hist_add(my_hist, add, (key >> shift) & 255u, w);
    });
    merge_warp_hists(sh);
    group_histogram(rg, sh);
    if (threadIdx.x < 32) pick_bin(sh, remaining);
    __syncthreads();
    if (!sh.found) {  // (rounding) the target is not reached: every key >= prefix
      Threshold all;
      all.key = prefix;
      __syncthreads();
      return all;
    }
    remaining -= sh.above;
    prefix |= static_cast<uint32_t>(sh.bin) << shift;
    mask |= 255u << shift;
    __syncthreads();  // sh.* read by all before the next pass rewrites it
  }
  // Ties at the threshold key: the first of them in id order until the
  // remaining weight is reached. Each chunk scans its own ties starting from
  // the weight of the earlier chunks' ties; the lowest crossing id wins.
  double chunk_weight = 1.0;  // G == 1: the scan alone decides
  if (rg.size > 1) {
    double w = 0.0;
    sweep(rg, a, [&](int64_t t, float v) {
      uint32_t key;
      double tw;
      if (fn(t, v, key, tw) && key == prefix) w += tw;
    });
    chunk_weight = block_reduce(w, SumOp{});
  }
  double run = group_exclusive_sum(rg, chunk_weight);
  if (threadIdx.x == 0) sh.cutoff = kNoCutoff;
  __syncthreads();
  if (chunk_weight > 0.0) {
    // Slabs of kThreads tokens in id order; the loads of kSweepUnroll slabs
    // together, and a slab without ties skipped (its weight, 0, is exact).
    constexpr int64_t kStep = static_cast<int64_t>(kSweepUnroll) * kThreads;
    for (int64_t base = rg.lo; base < rg.hi && sh.cutoff == kNoCutoff; base += kStep) {
      double w[kSweepUnroll];
      bool any = false;
#pragma unroll
      for (int k = 0; k < kSweepUnroll; ++k) {
        const int64_t t = base + k * kThreads + threadIdx.x;
        w[k] = 0.0;
        uint32_t key;
        double tw;
        if (t < rg.hi && fn(t, a[t], key, tw) && key == prefix) w[k] = tw;
        any |= w[k] > 0.0;
      }
      if (__syncthreads_or(any) == 0) continue;
      for (int k = 0; k < kSweepUnroll; ++k) {
        double total;
        const double incl = block_inclusive_scan(w[k], total);
        if (w[k] > 0.0 && run + incl >= remaining)
          atomicMin(&sh.cutoff, static_cast<int32_t>(base + k * kThreads + threadIdx.x));
        __syncthreads();
        if (sh.cutoff != kNoCutoff) break;
        run += total;
      }
    }
  }
  const int32_t cutoff = sh.cutoff;
  __syncthreads();
  Threshold th;
  th.key = prefix;
  th.cutoff = group_reduce(rg, cutoff, MinOp{});
  return th;
}

}  // namespace pagoda::cuda::sampling
