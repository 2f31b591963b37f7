// The decode path of moe_experts (moe_kernels.h): a few tokens, so the
// product is a stream of the selected experts' weights, each read once.
// Every block first groups the slots (token, j) by expert from the ids in
// shared memory (a few hundred comparisons), so no sort launch is needed:
//
// - gate_up: grid (I / 8, slots); block (n-tile, u) serves the u-th distinct
//   expert (blocks past the number of distinct experts exit). Warp w owns
//   output n: it streams gate row n and up row I + n (16-byte loads, 4
//   chunks per row in flight per lane), dots them with the x row of every
//   slot of the expert (x stays in L1/L2), reduces across the warp and
//   writes act[slot, n] = silu_mul(round(g), round(u)).
// - down: grid H / 4; block c-tile streams rows c..c+3 of every selected
//   expert (a warp takes two rows of one expert at a time), the dots of each
//   slot go to shared memory, then out[t, c] = round(sum_j weights[t, j] *
//   dot[t k + j, c]) in slot order.
//
// Rows whose length is not a multiple of 8 or whose bases are not 16-byte
// aligned use element loads (same math, same order per lane).
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/moe_common.cuh"
#include "backend/cuda/moe_kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxTok = 16;   // slots of one expert per pass over its rows (accumulators)
constexpr int kUnroll = 4;    // 16-byte chunks of each weight row a lane has in flight
constexpr int kDownRows = 4;  // hidden outputs per down block
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
__device__ void build_groups(const int32_t* ids, int slots, int num_experts, ExpertGroups& g) {
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
// lane's columns c of K, for j < m (kMaxTok at most): weight rows streamed,
// activation rows (row stride K) through L1. kVec: 16-byte chunks (K % 8 ==
// 0, 16-byte aligned bases); else single elements.
template <typename T, bool kVec, int kRows>
__device__ __forceinline__ void warp_dots(const T* const (&w)[kRows], int64_t k, const T* a,
                                          int a_div, const int* slots, int m,
                                          float (&acc)[kRows][kMaxTok]) {
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
        for (int j = 0; j < kMaxTok; ++j) {
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
      for (int j = 0; j < kMaxTok; ++j) {
        if (j >= m) break;
        const float xf = to_float(a[static_cast<int64_t>(slots[j] / a_div) * k + c]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][j] = fmaf(wf[r], xf, acc[r][j]);
      }
    }
  }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads) moe_decode_gate_up_kernel(MoeExpertsParams p) {
  pdl_enter();
  __shared__ ExpertGroups g;
  build_groups(p.ids, static_cast<int>(p.num_tokens * p.top_k), p.num_experts, g);
  const int u = blockIdx.y;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (u >= g.num || n >= p.inter) return;
  const int lane = threadIdx.x & 31;
  const int64_t h = p.hidden, in = p.inter;
  const T* gate = static_cast<const T*>(p.gate_up) + (g.expert[u] * 2 * in + n) * h;
  const T* const rows[2] = {gate, gate + in * h};
  T* act = static_cast<T*>(p.act_scratch);
  for (int b = g.start[u]; b < g.start[u + 1]; b += kMaxTok) {
    const int m = min(kMaxTok, g.start[u + 1] - b);
    float acc[2][kMaxTok] = {};
    warp_dots<T, kVec, 2>(rows, h, static_cast<const T*>(p.x), p.top_k, &g.slot[b], m, acc);
#pragma unroll
    for (int j = 0; j < kMaxTok; ++j) {
      if (j >= m) break;
      const float gv = warp_sum(acc[0][j]), uv = warp_sum(acc[1][j]);
      if (lane == 0) act[g.slot[b + j] * in + n] = moe_silu_mul<T>(gv, uv);
    }
  }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads) moe_decode_down_kernel(MoeExpertsParams p) {
  pdl_enter();
  __shared__ ExpertGroups g;
  __shared__ float dots[kSlots][kDownRows];
  build_groups(p.ids, static_cast<int>(p.num_tokens * p.top_k), p.num_experts, g);
  const int lane = threadIdx.x & 31;
  const int64_t h = p.hidden, in = p.inter;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kDownRows;
  constexpr int kPairs = kDownRows / 2;
  for (int item = threadIdx.x >> 5; item < g.num * kPairs; item += kWarps) {
    const int u = item / kPairs, r0 = (item % kPairs) * 2;
    const T* rows[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // a row past H reads row H - 1; its dot is never used
      const int64_t c = min(c0 + r0 + r, h - 1);
      rows[r] = static_cast<const T*>(p.down) + (g.expert[u] * h + c) * in;
    }
    for (int b = g.start[u]; b < g.start[u + 1]; b += kMaxTok) {
      const int m = min(kMaxTok, g.start[u + 1] - b);
      float acc[2][kMaxTok] = {};
      warp_dots<T, kVec, 2>(rows, in, static_cast<const T*>(p.act_scratch), 1, &g.slot[b], m, acc);
#pragma unroll
      for (int j = 0; j < kMaxTok; ++j) {
        if (j >= m) break;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float v = warp_sum(acc[r][j]);
          if (lane == 0) dots[g.slot[b + j]][r0 + r] = v;
        }
      }
    }
  }
  __syncthreads();
  T* out = static_cast<T*>(p.out);
  for (int o = threadIdx.x; o < p.num_tokens * kDownRows; o += kThreads) {
    const int t = o / kDownRows, r = o % kDownRows;
    const int64_t c = c0 + r;
    if (c >= h) continue;
    float acc = 0.0f;
    for (int j = 0; j < p.top_k; ++j) {
      const int s = t * p.top_k + j;
      if (g.id[s] >= 0) acc += p.weights[s] * dots[s][r];
    }
    out[t * h + c] = from_float<T>(acc);
  }
}

}  // namespace

cudaError_t launch_moe_experts_decode(const MoeExpertsParams& p, cudaStream_t stream) {
  const int64_t slots = p.num_tokens * p.top_k;
  if (p.num_tokens > kMoeDecodeMaxTokens || slots > kMoeDecodeMaxSlots)
    return cudaErrorInvalidValue;
  const bool vec_gate_up = p.hidden % 8 == 0 && is_aligned(p.x, 16) && is_aligned(p.gate_up, 16);
  const bool vec_down = p.inter % 8 == 0 && is_aligned(p.act_scratch, 16) && is_aligned(p.down, 16);
  const int64_t gate_up_blocks = ceil_div(p.inter, kWarps),
                down_blocks = ceil_div(p.hidden, kDownRows);
  if (gate_up_blocks > 0x7fffffff || down_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>(gate_up_blocks), static_cast<unsigned>(slots));
    launch_kernel(
        vec_gate_up ? moe_decode_gate_up_kernel<T, true> : moe_decode_gate_up_kernel<T, false>,
        grid, kThreads, 0, stream, p);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    launch_kernel(vec_down ? moe_decode_down_kernel<T, true> : moe_decode_down_kernel<T, false>,
                  dim3(static_cast<unsigned>(down_blocks)), kThreads, 0, stream, p);
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
