// Block-wide pieces of the candidate path of the sampling kernel
// (sampling_kernels.cu's draw_from_candidates): a histogram of a row's
// scaled logits by their distance below the row's max, the threshold it
// suggests, and a bitonic sort of (key, id) candidates in shared memory.
//
// Candidates are packed as one uint64: order_key of the sort value in the
// high half and ~id in the low half, so that sorting the packed values in
// descending order sorts by value descending, then id ascending (the CPU's
// tie order); 0 is below every real candidate (the padding).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/sampling_block.cuh"

namespace pagoda::cuda::sampling {

// Histogram bins of d = y_max - y, kBinsPerUnit per unit of y; the last bin
// also holds every d beyond (and NaN).
constexpr int kDistanceBins = 512;
constexpr float kBinsPerUnit = 16.0f;
// Candidates that fit the shared buffer (SelectShared::warp_hist, reused:
// the candidate path is done with it before any radix select runs).
constexpr int kMaxCandidates = static_cast<int>(sizeof(SelectShared::warp_hist) / sizeof(uint64_t));
static_assert(kMaxCandidates == 4096);

__device__ __forceinline__ uint64_t pack_candidate(uint32_t key, int32_t id) {
  return (static_cast<uint64_t>(key) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(id));
}
__device__ __forceinline__ int32_t candidate_id(uint64_t c) {
  return static_cast<int32_t>(~static_cast<uint32_t>(c & 0xffffffffu));
}

// The bin of a token at distance d (>= 0) below the max.
__device__ __forceinline__ int distance_bin(float d) {
  return d < static_cast<float>(kDistanceBins - 1) / kBinsPerUnit
             ? static_cast<int>(d * kBinsPerUnit)
             : kDistanceBins - 1;
}

// Smallest bin b whose bins 0..b reach `target` by count (by_mass false) or
// by their mass estimated as sum over bins of count * exp(-(b + offset) /
// kBinsPerUnit) (by_mass true: relative to the max's exp(0) = 1, each token
// `offset` of the way through its bin; 1: a lower bound; the last bin counts
// as 0); kDistanceBins - 1 if none. Also returns the count of bins 0..b in
// `count`. Call from one full warp; hist[kDistanceBins]. Only a guess: the
// caller checks the cut it gives.
__device__ __forceinline__ int pick_distance_bin(const int* hist, double target, bool by_mass,
                                                 double offset, int& count) {
  constexpr int kPerLane = kDistanceBins / 32;
  const int lane = threadIdx.x & 31;
  auto weight = [&](int b) {
    const double c = hist[b];
    if (!by_mass) return c;
    return b == kDistanceBins - 1 ? 0.0
                                  : c * exp(-(b + offset) / static_cast<double>(kBinsPerUnit));
  };
  double local = 0.0;
  int local_count = 0;
  for (int j = 0; j < kPerLane; ++j) {
    local += weight(lane * kPerLane + j);
    local_count += hist[lane * kPerLane + j];
  }
  double incl = local;
  int incl_count = local_count;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double n = __shfl_up_sync(0xffffffffu, incl, o);
    const int nc = __shfl_up_sync(0xffffffffu, incl_count, o);
    if (lane >= o) {
      incl += n;
      incl_count += nc;
    }
  }
  const unsigned hit = __ballot_sync(0xffffffffu, incl >= target);
  const int first = hit == 0 ? 31 : __ffs(hit) - 1;
  double cum = __shfl_sync(0xffffffffu, incl - local, first);
  int cum_count = __shfl_sync(0xffffffffu, incl_count - local_count, first);
  int bin = kDistanceBins - 1;
  for (int j = 0; j < kPerLane; ++j) {  // the same walk in every lane
    const int b = first * kPerLane + j;
    cum += weight(b);
    cum_count += hist[b];
    if (cum >= target || b == kDistanceBins - 1) {
      bin = b;
      break;
    }
  }
  count = cum_count;
  return bin;
}

// Sorts buf[0, n) descending in place (n a power of two). Call from all
// threads of the block; starts and ends with a barrier.
__device__ __forceinline__ void bitonic_sort_desc(uint64_t* buf, int n) {
  __syncthreads();
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n; i += kThreads) {
        const int ixj = i ^ j;
        if (ixj <= i) continue;
        const uint64_t a = buf[i], b = buf[ixj];
        const bool desc = (i & k) == 0;
        if (desc ? a < b : a > b) {
          buf[i] = b;
          buf[ixj] = a;
        }
      }
      __syncthreads();
    }
  }
}

// Smallest power of two >= max(n, 1).
__device__ __forceinline__ int pow2_at_least(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace pagoda::cuda::sampling
