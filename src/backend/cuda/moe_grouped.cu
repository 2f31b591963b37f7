// The grouped path of moe_experts (moe_kernels.h), four launches:
//
// 1. sort (one block of 1024 threads): counts the slots of each expert
//    (shared-memory atomics on integers), exclusive prefix sums give each
//    expert's segment in `sorted` and its 64-row tiles; the slots are then
//    scattered into their segments. Buffers are sized by T*k and the tile
//    count is bounded by ceil(T*k / 64) + min(E, T*k), so grids are fixed on
//    the host and blocks past the device's tile count exit (graph-safe).
// 2. gate_up GEMM: a CTA (4 warps, 2 x 2) per (64 columns of I, tile)
//    computes a 64 x 128 product of the tile's x rows (gathered by token)
//    with 64 gate rows and the matching 64 up rows of the expert, laid out so
//    each warp holds a gate column and its up column in the same registers;
//    the epilogue writes act[sorted row, n] = silu_mul(round(g), round(u)).
// 3. down GEMM: a CTA per (128 columns of H, tile) computes the tile's act
//    rows (contiguous in sorted order) times the expert's down rows and
//    writes weight[slot] * dot as f32 to rows[slot, c].
// 4. reduce: out[t, c] = round(sum_j rows[t k + j, c]) over the valid slots
//    in slot order.
//
// GEMM main loop: mma.sync m16n8k16 (16-bit in, f32 accumulation), tiles of
// 32 columns of K in a 3-stage cp.async pipeline (16-byte copies, zero-fill
// past the segment, the columns or K), ldmatrix from rows padded to 80
// bytes (no bank conflicts). When K % 8 != 0 or a base is not 16-byte
// aligned the copies are element loads through registers (same math).
#include <algorithm>

#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/mma_helpers.cuh"
#include "backend/cuda/moe_common.cuh"
#include "backend/cuda/moe_kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kBM = 64;   // rows (slots of one expert) per tile
constexpr int kBN = 128;  // output columns per CTA (gate_up: 64 gate + 64 up)
constexpr int kBK = 32;
constexpr int kStages = 3;
constexpr int kLd = kBK + 8;  // shared-memory row: 80 bytes
constexpr int kGemmThreads = 128;
constexpr int kSortThreads = 1024;
constexpr int kReduceThreads = 256;

struct GroupedScratch {
  float* rows;     // [slots, hidden]: weight * down dot of each slot
  int* num_tiles;  // [1]
  int* sorted;     // [slots]: slot ids grouped by expert (valid slots only)
  int4* tiles;     // [max_tiles]: expert, first and end position in `sorted`
};

int64_t align16(int64_t n) {
  return (n + 15) / 16 * 16;
}

int64_t max_tiles(int64_t slots, int num_experts) {
  return ceil_div(slots, kBM) + std::min<int64_t>(num_experts, slots);
}

// Byte offsets of the parts; the last entry is the total.
struct ScratchLayout {
  int64_t num_tiles, sorted, tiles, total;
};

ScratchLayout scratch_layout(int64_t slots, int64_t hidden, int num_experts) {
  ScratchLayout l;
  l.num_tiles = align16(slots * hidden * static_cast<int64_t>(sizeof(float)));
  l.sorted = l.num_tiles + 16;
  l.tiles = l.sorted + align16(slots * static_cast<int64_t>(sizeof(int)));
  l.total = l.tiles + max_tiles(slots, num_experts) * static_cast<int64_t>(sizeof(int4));
  return l;
}

// Exclusive prefix sum over the block (blockDim.x a multiple of 32); *total
// gets the block's sum. Contains __syncthreads: call from every thread.
__device__ int block_exclusive_scan(int v, int* total) {
  __shared__ int warp_sums[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, num_warps = blockDim.x >> 5;
  int inclusive = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += n;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int w = lane < num_warps ? warp_sums[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    warp_sums[lane] = w;
  }
  __syncthreads();
  const int result = inclusive - v + (warp > 0 ? warp_sums[warp - 1] : 0);
  *total = warp_sums[num_warps - 1];
  __syncthreads();  // warp_sums may be reused by the next call
  return result;
}

__global__ void __launch_bounds__(kSortThreads)
    moe_sort_kernel(MoeExpertsParams p, GroupedScratch g) {
  pdl_enter();
  __shared__ int count[kMoeMaxExperts];
  __shared__ int cursor[kMoeMaxExperts];
  const int num_experts = p.num_experts;
  const int64_t slots = p.num_tokens * p.top_k;
  for (int e = threadIdx.x; e < num_experts; e += kSortThreads) count[e] = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s < slots; s += kSortThreads) {
    const int e = p.ids[s];
    if (e >= 0 && e < num_experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  // Each thread owns a contiguous range of experts.
  const int per = (num_experts + kSortThreads - 1) / kSortThreads;
  const int lo = min(num_experts, static_cast<int>(threadIdx.x) * per);
  const int hi = min(num_experts, lo + per);
  int rows = 0, tiles = 0;
  for (int e = lo; e < hi; ++e) {
    rows += count[e];
    tiles += (count[e] + kBM - 1) / kBM;
  }
  int total_rows = 0, total_tiles = 0;
  int row = block_exclusive_scan(rows, &total_rows);
  int tile = block_exclusive_scan(tiles, &total_tiles);
  for (int e = lo; e < hi; ++e) {
    const int c = count[e];
    cursor[e] = row;
    for (int i = 0; i * kBM < c; ++i)
      g.tiles[tile++] = make_int4(e, row + i * kBM, row + min(c, (i + 1) * kBM), 0);
    row += c;
  }
  if (threadIdx.x == 0) *g.num_tiles = total_tiles;
  __syncthreads();
  // The order within an expert's segment varies between runs; no value
  // depends on it (each row of a product is computed alone, outputs go by slot).
  for (int64_t s = threadIdx.x; s < slots; s += kSortThreads) {
    const int e = p.ids[s];
    if (e >= 0 && e < num_experts) g.sorted[atomicAdd(&cursor[e], 1)] = static_cast<int>(s);
  }
}

// kGateUp: act[sorted rows] = silu_mul(x[tokens] @ gate_up[e]^T); else
// rows[slots] = weight * (act[sorted rows] @ down[e]^T). kAsync: cp.async
// copies (K % 8 == 0, 16-byte aligned bases).
template <typename T, bool kGateUp, bool kAsync>
__global__ void __launch_bounds__(kGemmThreads)
    moe_grouped_gemm_kernel(MoeExpertsParams p, GroupedScratch g) {
  pdl_enter();
  const int tile = blockIdx.y;
  if (tile >= *g.num_tiles) return;
  const int4 info = g.tiles[tile];
  const int expert = info.x, row0 = info.y, rows = info.z - info.y;
  const int64_t h = p.hidden, in = p.inter;
  const int64_t k_len = kGateUp ? h : in;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * (kGateUp ? kBN / 2 : kBN);
  __shared__ alignas(128) T sa[kStages][kBM][kLd];
  __shared__ alignas(128) T sb[kStages][kBN][kLd];

  // Each thread copies the same 8-column group `cc` of its rows every stage:
  // A rows tid / 4 + 32 i, B rows tid / 4 + 32 i.
  constexpr int kGroups = kBK / 8;
  constexpr int kRowStep = kGemmThreads / kGroups;
  constexpr int kAIters = kBM / kRowStep, kBIters = kBN / kRowStep;
  const int tid = threadIdx.x, cc = tid % kGroups, r_first = tid / kGroups;
  const T* a_src[kAIters];
  bool a_ok[kAIters];
#pragma unroll
  for (int i = 0; i < kAIters; ++i) {
    const int r = r_first + i * kRowStep;
    a_ok[i] = r < rows;
    if constexpr (kGateUp) {
      const int token = a_ok[i] ? g.sorted[row0 + r] / p.top_k : 0;
      a_src[i] = static_cast<const T*>(p.x) + token * h;
    } else {
      a_src[i] = static_cast<const T*>(p.act_scratch) + (row0 + (a_ok[i] ? r : 0)) * in;
    }
  }
  const T* b_src[kBIters];
  bool b_ok[kBIters];
#pragma unroll
  for (int i = 0; i < kBIters; ++i) {
    const int r = r_first + i * kRowStep;
    if constexpr (kGateUp) {
      // Columns [32 q, 32 q + 32) of warp column q: gate rows n0 + 32 q + j,
      // then [.. + 64): the up rows of the same n.
      const int q = r / 64, j = r % 64;
      const int64_t n = n0 + q * 32 + j % 32;
      b_ok[i] = n < in;
      const int64_t w_row = (j < 32 ? 0 : in) + (b_ok[i] ? n : 0);
      b_src[i] = static_cast<const T*>(p.gate_up) + (expert * 2 * in + w_row) * h;
    } else {
      const int64_t c = n0 + r;
      b_ok[i] = c < h;
      b_src[i] = static_cast<const T*>(p.down) + (expert * h + (b_ok[i] ? c : 0)) * in;
    }
  }
  auto copy = [&](T* dst, const T* src, bool ok, int64_t kk) {
    if constexpr (kAsync) {
      const bool in_k = ok && kk < k_len;
      cp_async_16(smem_addr(dst), in_k ? src + kk : src, in_k);
    } else {
      Vec<T, 8> v;
#pragma unroll
      for (int q = 0; q < 8; ++q) v.v[q] = ok && kk + q < k_len ? src[kk + q] : from_float<T>(0.0f);
      store_vec<T, 8>(dst, v);
    }
  };
  auto load_stage = [&](int stage, int64_t kt) {
    const int64_t kk = kt * kBK + cc * 8;
#pragma unroll
    for (int i = 0; i < kAIters; ++i)
      copy(&sa[stage][r_first + i * kRowStep][cc * 8], a_src[i], a_ok[i], kk);
#pragma unroll
    for (int i = 0; i < kBIters; ++i)
      copy(&sb[stage][r_first + i * kRowStep][cc * 8], b_src[i], b_ok[i], kk);
  };

  const int64_t num_k = (k_len + kBK - 1) / kBK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_k) load_stage(s, s);
    cp_async_commit();
  }
  const int lane = tid & 31, warp = tid >> 5, wm = warp / 2, wn = warp % 2;
  float acc[2][8][4] = {};
  for (int64_t kt = 0; kt < num_k; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt landed for all; stage kt - 1 is no longer read
    const int64_t next = kt + kStages - 1;
    if (next < num_k) load_stage(static_cast<int>(next % kStages), next);
    cp_async_commit();
    const int st = static_cast<int>(kt % kStages);
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t af[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        ldmatrix_x4(af[mi],
                    smem_addr(&sa[st][wm * 32 + mi * 16 + lane % 16][ks * 16 + lane / 16 * 8]));
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        uint32_t bf[4];
        ldmatrix_x4(bf, smem_addr(&sb[st][wn * 64 + nj * 16 + lane % 8 + lane / 16 * 8]
                                     [ks * 16 + (lane / 8) % 2 * 8]));
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          mma_16816<T>(acc[mi][2 * nj], af[mi], bf[0], bf[1]);
          mma_16816<T>(acc[mi][2 * nj + 1], af[mi], bf[2], bf[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Accumulator (mi, ni, 2 half + q): row wm 32 + mi 16 + lane / 4 + 8 half,
  // column wn 64 + ni 8 + 2 (lane % 4) + q.
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = wm * 32 + mi * 16 + lane / 4 + half * 8;
      if (r >= rows) continue;
      if constexpr (kGateUp) {
        T* act = static_cast<T*>(p.act_scratch) + (row0 + r) * in;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int64_t n = n0 + wn * 32 + ni * 8 + (lane % 4) * 2 + q;
            if (n < in)
              act[n] = moe_silu_mul<T>(acc[mi][ni][half * 2 + q], acc[mi][ni + 4][half * 2 + q]);
          }
        }
      } else {
        const int slot = g.sorted[row0 + r];
        const float w = p.weights[slot];
        float* dst = g.rows + static_cast<int64_t>(slot) * h;
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int64_t c = n0 + wn * 64 + ni * 8 + (lane % 4) * 2 + q;
            if (c < h) dst[c] = w * acc[mi][ni][half * 2 + q];
          }
        }
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    moe_reduce_kernel(MoeExpertsParams p, GroupedScratch g) {
  pdl_enter();
  const int64_t h = p.hidden, total = p.num_tokens * h;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * kReduceThreads) {
    const int64_t t = o / h, c = o % h;
    float acc = 0.0f;
    for (int j = 0; j < p.top_k; ++j) {
      const int64_t s = t * p.top_k + j;
      const int e = p.ids[s];
      if (e >= 0 && e < p.num_experts) acc += g.rows[s * h + c];
    }
    static_cast<T*>(p.out)[o] = from_float<T>(acc);
  }
}

}  // namespace

int64_t moe_experts_scratch_bytes(int64_t slots, int64_t hidden, int num_experts) {
  return scratch_layout(slots, hidden, num_experts).total;
}

cudaError_t launch_moe_experts_grouped(const MoeExpertsParams& p, cudaStream_t stream) {
  const int64_t slots = p.num_tokens * p.top_k;
  const ScratchLayout l = scratch_layout(slots, p.hidden, p.num_experts);
  const int64_t tiles = max_tiles(slots, p.num_experts);
  const int64_t gate_up_cols = ceil_div(p.inter, kBN / 2), down_cols = ceil_div(p.hidden, kBN);
  if (p.num_experts > kMoeMaxExperts || p.scratch_bytes < l.total || !is_aligned(p.scratch, 16) ||
      slots > 0x7fffffff || tiles > 65535 || gate_up_cols > 0x7fffffff || down_cols > 0x7fffffff)
    return cudaErrorInvalidValue;
  char* base = static_cast<char*>(p.scratch);
  GroupedScratch g;
  g.rows = reinterpret_cast<float*>(base);
  g.num_tiles = reinterpret_cast<int*>(base + l.num_tiles);
  g.sorted = reinterpret_cast<int*>(base + l.sorted);
  g.tiles = reinterpret_cast<int4*>(base + l.tiles);
  const bool async_gate_up = p.hidden % 8 == 0 && is_aligned(p.x, 16) && is_aligned(p.gate_up, 16);
  const bool async_down =
      p.inter % 8 == 0 && is_aligned(p.act_scratch, 16) && is_aligned(p.down, 16);
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(moe_sort_kernel, 1, kSortThreads, 0, stream, p, g);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    launch_kernel(async_gate_up ? moe_grouped_gemm_kernel<T, true, true>
                                : moe_grouped_gemm_kernel<T, true, false>,
                  dim3(static_cast<unsigned>(gate_up_cols), static_cast<unsigned>(tiles)),
                  kGemmThreads, 0, stream, p, g);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    launch_kernel(async_down ? moe_grouped_gemm_kernel<T, false, true>
                             : moe_grouped_gemm_kernel<T, false, false>,
                  dim3(static_cast<unsigned>(down_cols), static_cast<unsigned>(tiles)),
                  kGemmThreads, 0, stream, p, g);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    const int64_t blocks =
        std::min<int64_t>(ceil_div(p.num_tokens * p.hidden, kReduceThreads), 65536);
    launch_kernel(moe_reduce_kernel<T>, static_cast<unsigned>(blocks), kReduceThreads, 0, stream, p,
                  g);
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
