// The decode path of moe_experts (moe_kernels.h), v2: a few tokens, so the
// product is a stream of the selected experts' weights, each read once. The
// same work and math as v1 (moe_decode.cu: every value bit for bit), laid
// out for bandwidth:
//
// - one wave of resident blocks: each grid is sized from the kernel's
//   occupancy so all its blocks are resident at once, and they loop over the
//   work; each block groups the slots by expert once (build_groups), not once
//   per 8 outputs (v1 launched up to I / 8 x T k blocks in several waves, each
//   paying the ids load and the grouping before its first weight load);
// - the accumulators per pass over an expert's rows (kTok, 1..16) follow T,
//   so small batches use few registers and more warps fit per SM;
// - the work is split evenly: the host rounds the grid so that each warp (or
//   block) gets the same number of items when every selected expert is
//   distinct per token.
//
// gate_up: an item is (distinct expert u, output n): a warp streams gate row
// n and up row I + n (16-byte loads, 4 chunks per row in flight per lane),
// dots them with the x row of each of u's slots, reduces across the warp and
// writes act[slot, n] = silu_mul(round(g), round(u)); warp w of block b takes
// items b * 8 + w, then + 8 * gridDim.x, ... (neighbouring warps read
// neighbouring rows). down: a tile is tile_rows (4, 8 or 16) hidden outputs;
// a block takes tiles b, b + gridDim.x, ...; its warps take (expert, row
// pair) items, the dots of each slot go to shared memory, then out[t, c] =
// round(sum_j weights[t, j] * dot[t k + j, c]) in slot order.
#include <algorithm>

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

constexpr int kMaxDownRows = 16;  // hidden outputs per down tile, at most

// Blocks per SM the launch bounds ask for: one accumulator per row (T = 1)
// leaves registers for more resident warps (4 blocks: 64 registers a thread,
// 3: 80, 2: 128); each is the most that compiles without spills (ptxas -v,
// sm_90a). 2 blocks keep 16 warps x 4 KB of weights in flight per SM.
template <int kTok>
constexpr int kGateUpMinBlocks = kTok == 1 ? 4 : 2;
template <int kTok>
constexpr int kDownMinBlocks = kTok == 1 ? 3 : 2;

template <typename T, bool kVec, int kTok>
__global__ void __launch_bounds__(kThreads, kGateUpMinBlocks<kTok>)
    moe_decode_v2_gate_up_kernel(MoeExpertsParams p) {
  pdl_enter();
  __shared__ ExpertGroups g;
  build_groups(p.ids, static_cast<int>(p.num_tokens * p.top_k), p.num_experts, g);
  const int lane = threadIdx.x & 31;
  const int64_t h = p.hidden, in = p.inter;
  const int64_t items = g.num * in;
  const T* x = static_cast<const T*>(p.x);
  T* act = static_cast<T*>(p.act_scratch);
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5); item < items;
       item += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int u = static_cast<int>(item / in);
    const int64_t n = item - u * in;
    const T* gate = static_cast<const T*>(p.gate_up) + (g.expert[u] * 2 * in + n) * h;
    const T* const rows[2] = {gate, gate + in * h};
    for (int b = g.start[u]; b < g.start[u + 1]; b += kTok) {
      const int m = min(kTok, g.start[u + 1] - b);
      float acc[2][kTok] = {};
      warp_dots<T, kVec, 2, kTok>(rows, h, x, p.top_k, &g.slot[b], m, acc);
#pragma unroll
      for (int j = 0; j < kTok; ++j) {
        if (j >= m) break;
        const float gv = warp_sum(acc[0][j]), uv = warp_sum(acc[1][j]);
        if (lane == 0) act[g.slot[b + j] * in + n] = moe_silu_mul<T>(gv, uv);
      }
    }
  }
}

// tile_rows: 4, 8 or 16 (even, <= kMaxDownRows).
template <typename T, bool kVec, int kTok>
__global__ void __launch_bounds__(kThreads, kDownMinBlocks<kTok>)
    moe_decode_v2_down_kernel(MoeExpertsParams p, int tile_rows) {
  pdl_enter();
  __shared__ ExpertGroups g;
  __shared__ float dots[kSlots][kMaxDownRows];
  build_groups(p.ids, static_cast<int>(p.num_tokens * p.top_k), p.num_experts, g);
  const int lane = threadIdx.x & 31;
  const int64_t h = p.hidden, in = p.inter;
  const int pairs = tile_rows / 2;
  const int64_t tiles = (h + tile_rows - 1) / tile_rows;
  const T* act = static_cast<const T*>(p.act_scratch);
  T* out = static_cast<T*>(p.out);
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t c0 = tile * tile_rows;
    for (int item = threadIdx.x >> 5; item < g.num * pairs; item += kWarps) {
      const int u = item / pairs, r0 = (item % pairs) * 2;
      const T* rows[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {  // a row past H reads row H - 1; its dot is never used
        const int64_t c = min(c0 + r0 + r, h - 1);
        rows[r] = static_cast<const T*>(p.down) + (g.expert[u] * h + c) * in;
      }
      for (int b = g.start[u]; b < g.start[u + 1]; b += kTok) {
        const int m = min(kTok, g.start[u + 1] - b);
        float acc[2][kTok] = {};
        warp_dots<T, kVec, 2, kTok>(rows, in, act, 1, &g.slot[b], m, acc);
#pragma unroll
        for (int j = 0; j < kTok; ++j) {
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
    for (int o = threadIdx.x; o < p.num_tokens * tile_rows; o += kThreads) {
      const int t = o / tile_rows, r = o % tile_rows;
      const int64_t c = c0 + r;
      if (c >= h) continue;
      float acc = 0.0f;
      for (int j = 0; j < p.top_k; ++j) {
        const int s = t * p.top_k + j;
        if (g.id[s] >= 0) acc += p.weights[s] * dots[s][r];
      }
      out[t * h + c] = from_float<T>(acc);
    }
    __syncthreads();  // dots are rewritten by the next tile
  }
}

// Blocks of kThreads of `kernel` resident on the current device at once.
int resident_blocks(const void* kernel) {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0) != cudaSuccess)
    cudaGetLastError();  // clear; the fallback below still launches correctly
  return std::max(1, sms * per_sm);
}

// Units of work spread over at most `slots_max` workers in equal rounds:
// the fewest workers that still need the fewest rounds.
int64_t even_workers(int64_t units, int64_t slots_max) {
  const int64_t rounds = ceil_div(units, std::max<int64_t>(slots_max, 1));
  return std::max<int64_t>(1, ceil_div(units, std::max<int64_t>(rounds, 1)));
}

// resident_blocks of each kernel instance, asked once (occupancy does not change).
template <typename T, bool kVec, int kTok>
int gate_up_fit() {
  static const int fit =
      resident_blocks(reinterpret_cast<const void*>(moe_decode_v2_gate_up_kernel<T, kVec, kTok>));
  return fit;
}
template <typename T, bool kVec, int kTok>
int down_fit() {
  static const int fit =
      resident_blocks(reinterpret_cast<const void*>(moe_decode_v2_down_kernel<T, kVec, kTok>));
  return fit;
}

template <typename T, int kTok>
cudaError_t launch_v2(const MoeExpertsParams& p, bool vec_gate_up, bool vec_down,
                      cudaStream_t stream) {
  const auto gate_up = vec_gate_up ? moe_decode_v2_gate_up_kernel<T, true, kTok>
                                   : moe_decode_v2_gate_up_kernel<T, false, kTok>;
  const auto down = vec_down ? moe_decode_v2_down_kernel<T, true, kTok>
                             : moe_decode_v2_down_kernel<T, false, kTok>;
  const int gate_up_resident =
      vec_gate_up ? gate_up_fit<T, true, kTok>() : gate_up_fit<T, false, kTok>();
  const int down_resident = vec_down ? down_fit<T, true, kTok>() : down_fit<T, false, kTok>();
  // Distinct experts at most (exactly, when each token's k ids are distinct and T = 1).
  const int64_t distinct = std::min<int64_t>(p.num_tokens * p.top_k, p.num_experts);
  const int64_t gate_up_warps =
      even_workers(distinct * p.inter, int64_t{gate_up_resident} * kWarps);
  const int64_t gate_up_blocks = ceil_div(gate_up_warps, kWarps);
  // The smallest tile whose (expert, row pair) items keep every warp busy.
  int tile_rows = 4;
  while (tile_rows < kMaxDownRows && distinct * (tile_rows / 2) < kWarps) tile_rows *= 2;
  const int64_t down_blocks = even_workers(ceil_div(p.hidden, tile_rows), down_resident);
  if (gate_up_blocks > 0x7fffffff || down_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  launch_kernel(gate_up, dim3(static_cast<unsigned>(gate_up_blocks)), kThreads, 0, stream, p);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  launch_kernel(down, dim3(static_cast<unsigned>(down_blocks)), kThreads, 0, stream, p, tile_rows);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_moe_experts_decode_v2(const MoeExpertsParams& p, cudaStream_t stream) {
  const int64_t slots = p.num_tokens * p.top_k;
  if (p.num_tokens > kMoeDecodeMaxTokens || slots > kMoeDecodeMaxSlots)
    return cudaErrorInvalidValue;
  const bool vec_gate_up = p.hidden % 8 == 0 && is_aligned(p.x, 16) && is_aligned(p.gate_up, 16);
  const bool vec_down = p.inter % 8 == 0 && is_aligned(p.act_scratch, 16) && is_aligned(p.down, 16);
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    // An expert holds at most T slots when each token's ids are distinct;
    // larger groups take several passes of kTok.
    if (p.num_tokens <= 1) return launch_v2<T, 1>(p, vec_gate_up, vec_down, stream);
    if (p.num_tokens <= 2) return launch_v2<T, 2>(p, vec_gate_up, vec_down, stream);
    if (p.num_tokens <= 4) return launch_v2<T, 4>(p, vec_gate_up, vec_down, stream);
    if (p.num_tokens <= 8) return launch_v2<T, 8>(p, vec_gate_up, vec_down, stream);
    return launch_v2<T, 16>(p, vec_gate_up, vec_down, stream);
  });
}

}  // namespace pagoda::cuda
