// The decode path of moe_experts (moe_kernels.h), v1 kernels (kept for A/B
// against moe_decode_v2.cu; PAGODA_MOE_DECODE=v1): a few tokens, so the
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
#include "backend/cuda/moe_decode_groups.cuh"

namespace pagoda::cuda {
namespace {

using moe_decode::build_groups;
using moe_decode::ExpertGroups;
using moe_decode::kSlots;
using moe_decode::kThreads;
using moe_decode::kWarps;
using moe_decode::warp_dots;

constexpr int kMaxTok = 16;   // slots of one expert per pass over its rows (accumulators)
constexpr int kDownRows = 4;  // hidden outputs per down block

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
    warp_dots<T, kVec, 2, kMaxTok>(rows, h, static_cast<const T*>(p.x), p.top_k, &g.slot[b], m,
                                   acc);
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
      warp_dots<T, kVec, 2, kMaxTok>(rows, in, static_cast<const T*>(p.act_scratch), 1, &g.slot[b],
                                     m, acc);
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

cudaError_t launch_moe_experts_decode_v1(const MoeExpertsParams& p, cudaStream_t stream) {
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
