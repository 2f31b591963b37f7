// Block-wide building blocks of the sampling kernel: reductions, an
// inclusive scan, and the bin pick of the radix select (sampling_group.cuh)
// that finds the threshold of the "first n" tokens in (value descending, id
// ascending) order, by count or by probability mass.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::cuda::sampling {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int32_t kNoCutoff = 0x7fffffff;

// Monotone map of a float to uint32 (larger float -> larger key); -0 maps
// like +0 so that equal floats get equal keys.
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t b = f == 0.0f ? 0u : __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The selected set: tokens with key > key, or key == key and id <= cutoff.
struct Threshold {
  uint32_t key = 0;
  int32_t cutoff = kNoCutoff;
  __device__ __forceinline__ bool selects(uint32_t k, int32_t id) const {
    return k > key || (k == key && id <= cutoff);
  }
};

// A (score, id) candidate; id -1 is "none".
struct Candidate {
  float score;
  int32_t id;
};

// Prefers the higher score, then the lower id (NaN scores never win).
__device__ __forceinline__ Candidate better(Candidate a, Candidate b) {
  if (b.id < 0) return a;
  if (a.id < 0) return b;
  if (b.score > a.score || (b.score == a.score && b.id < a.id)) return b;
  return a;
}

__device__ __forceinline__ Candidate warp_best(Candidate c) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Candidate other;
    other.score = __shfl_xor_sync(0xffffffffu, c.score, o);
    other.id = __shfl_xor_sync(0xffffffffu, c.id, o);
    c = better(c, other);
  }
  return c;
}

// Every thread gets the block's best candidate.
__device__ __forceinline__ Candidate block_best(Candidate c) {
  __shared__ Candidate buf[kWarps];
  c = warp_best(c);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = c;
  __syncthreads();
  Candidate r = buf[0];
  for (int i = 1; i < kWarps; ++i) r = better(r, buf[i]);
  return r;
}

struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

// Every thread gets op over the block (warps combined in a fixed order).
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op) {
  __shared__ T buf[kWarps];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = buf[0];
  for (int i = 1; i < kWarps; ++i) r = op(r, buf[i]);
  return r;
}

// Inclusive prefix sum over the block in thread order; `total` gets the sum.
__device__ __forceinline__ double block_inclusive_scan(double v, double& total) {
  __shared__ double warp_sums[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  __syncthreads();
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  double offset = 0.0;
  total = 0.0;
  for (int i = 0; i < kWarps; ++i) {
    if (i < warp) offset += warp_sums[i];
    total += warp_sums[i];
  }
  return v + offset;
}

struct SelectShared {
  double hist[256];
  double warp_hist[kWarps][256];  // one private histogram per warp (no atomics)
  int bin;
  double above;
  bool found;
  int32_t cutoff;
};

// Adds w to bin `bin` of the calling warp's histogram for every lane where
// `add` holds. Call from all 32 lanes of the warp. Lanes of one bin are
// summed by a fixed shuffle tree (the others contribute +0.0, exact), so the
// histogram is the same bits whatever the warp's timing; one pass of the
// loop per distinct bin among the warp's lanes.
__device__ __forceinline__ void warp_hist_add(double* hist, bool add, uint32_t bin, double w) {
  const int lane = threadIdx.x & 31;
  unsigned pending = __ballot_sync(0xffffffffu, add);
  while (pending != 0) {
    const int leader = __ffs(pending) - 1;
    const uint32_t b = __shfl_sync(0xffffffffu, bin, leader);
    const bool mine = add && bin == b;
    double s = mine ? w : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == leader) hist[b] += s;
    pending &= ~__ballot_sync(0xffffffffu, mine);
  }
}

// sh.hist = the warps' histograms summed in warp order; clears them.
__device__ __forceinline__ void merge_warp_hists(SelectShared& sh) {
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += kThreads) {
    double s = 0.0;
    for (int w = 0; w < kWarps; ++w) {
      s += sh.warp_hist[w][i];
      sh.warp_hist[w][i] = 0.0;
    }
    sh.hist[i] = s;
  }
  __syncthreads();
}

// Warp 0: scanning bins 255 -> 0, finds the first non-empty bin where the
// weight of the higher bins plus its own reaches `target`; writes bin,
// above (weight of the higher bins) and found to sh.
__device__ __forceinline__ void pick_bin(SelectShared& sh, double target) {
  const int lane = threadIdx.x & 31;
  double c[8];
  double local = 0.0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    c[j] = sh.hist[255 - 8 * lane - j];
    local += c[j];
  }
  double incl = local;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += n;
  }
  double excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (lane == 0) excl = 0.0;
  const unsigned hit = __ballot_sync(0xffffffffu, local > 0.0 && incl >= target);
  if (hit == 0) {
    if (lane == 0) sh.found = false;
    return;
  }
  if (lane != __ffs(hit) - 1) return;
  double cum = excl;
  int last = -1;
  double last_above = 0.0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (c[j] > 0.0) {
      last = j;
      last_above = cum;
      if (cum + c[j] >= target) break;
    }
    cum += c[j];
  }
  // `last` is the hit bin, or (rounding) the lowest non-empty bin of the lane.
  sh.bin = 255 - 8 * lane - last;
  sh.above = last_above;
  sh.found = true;
}

}  // namespace pagoda::cuda::sampling
