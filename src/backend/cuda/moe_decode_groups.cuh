// Device pieces shared by the two decode-path kernel sets of moe_experts
// (moe_decode.cu: v1, a block per output tile; moe_decode_v2.cu: resident
// blocks that loop over the work): the slots grouped by expert in shared
// memory, and a warp's dot products of streamed weight rows with the
// activation rows of an expert's slots.
#pragma once

#include "backend/cuda/moe_common.cuh"
#include "backend/cuda/moe_kernels.h"

namespace pagoda::cuda::moe_decode {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 4;  // 16-byte chunks of each weight row a lane has in flight
constexpr int kSlots = static_cast<int>(kMoeDecodeMaxSlots);
static_assert(kThreads >= kSlots, "one thread per slot builds the groups");

// The distinct valid experts of the batch in order of first appearance
// among the slots, each with its slots in ascending order.
struct ExpertGroups {
  int num;                // distinct valid experts
  int expert[kSlots];     // group u's expert
  int start[kSlots + 1];  // group u's slots: slot[start[u] .. start[u + 1])
  int slot[kSlots];
  int id[kSlots];     // ids[s], or -1 when out of [0, E)
  int lead[kSlots];   // 1 when slot s is its expert's first
  int group[kSlots];  // a leading slot's group
  int count[kSlots];  // group u's number of slots
};

// Contains __syncthreads: call from every thread of the block.
__device__ inline void build_groups(const int32_t* ids, int slots, int num_experts,
                                    ExpertGroups& g) {
  const int s = threadIdx.x;
  int e = -1;
  if (s < slots) {
    e = ids[s];
    if (e < 0 || e >= num_experts) e = -1;
    g.id[s] = e;
  }
  __syncthreads();
  int first = -1, pos = 0, count = 0;
  if (e >= 0) {
    for (int i = 0; i < slots; ++i) {
      if (g.id[i] != e) continue;
      if (first < 0) first = i;
      if (i < s) ++pos;
      ++count;
    }
  }
  if (s < slots) g.lead[s] = e >= 0 && first == s ? 1 : 0;
  __syncthreads();
  if (e >= 0 && first == s) {
    int u = 0;
    for (int i = 0; i < s; ++i) u += g.lead[i];
    g.group[s] = u;
    g.expert[u] = e;
    g.count[u] = count;
  }
  __syncthreads();
  if (s == 0) {
    int num = 0;
    for (int i = 0; i < slots; ++i) num += g.lead[i];
    g.num = num;
    g.start[0] = 0;
    for (int u = 0; u < num; ++u) g.start[u + 1] = g.start[u] + g.count[u];
  }
  __syncthreads();
  if (e >= 0) g.slot[g.start[g.group[first]] + pos] = s;
  __syncthreads();
}

// Lane partial sums acc[r][j] += w[r][c] * a[slots[j] / a_div][c] over this
// lane's columns c of K, for j < m (kTok at most): weight rows streamed,
// activation rows (row stride K) through L1. kVec: 16-byte chunks (K % 8 ==
// 0, 16-byte aligned bases), lane l taking chunks l, l + 32, ... in order;
// else single elements l, l + 32, .... The per-lane order of the FMAs does
// not depend on kTok, so every kTok gives the same bits.
template <typename T, bool kVec, int kRows, int kTok>
__device__ __forceinline__ void warp_dots(const T* const (&w)[kRows], int64_t k, const T* a,
                                          int a_div, const int* slots, int m,
                                          float (&acc)[kRows][kTok]) {
  const int lane = threadIdx.x & 31;
  if constexpr (kVec) {
    const int64_t chunks = k / 8;
    for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
      uint4 wv[kUnroll][kRows];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + 32 * u;
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          wv[u][r] = c < chunks ? load_stream(w[r] + c * 8) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + 32 * u;
        if (c >= chunks) break;
        float wf[kRows][8];
#pragma unroll
        for (int r = 0; r < kRows; ++r) moe_unpack8<T>(wv[u][r], wf[r]);
#pragma unroll
        for (int j = 0; j < kTok; ++j) {
          if (j >= m) break;
          const T* ar = a + static_cast<int64_t>(slots[j] / a_div) * k + c * 8;
          float xf[8];
          moe_unpack8<T>(__ldg(reinterpret_cast<const uint4*>(ar)), xf);
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[r][j] = fmaf(wf[r][i], xf[i], acc[r][j]);
          }
        }
      }
    }
  } else {
    for (int64_t c = lane; c < k; c += 32) {
      float wf[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) wf[r] = to_float(w[r][c]);
#pragma unroll
      for (int j = 0; j < kTok; ++j) {
        if (j >= m) break;
        const float xf = to_float(a[static_cast<int64_t>(slots[j] / a_div) * k + c]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][j] = fmaf(wf[r], xf, acc[r][j]);
      }
    }
  }
}

}  // namespace pagoda::cuda::moe_decode
