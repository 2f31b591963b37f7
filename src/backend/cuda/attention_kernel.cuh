// The attention tile kernel (see attention.h for the design). Included only
// by the attention_d*.cu instantiation files.
//
// Shapes inside a CTA (kD = padded head dim, rows padded to 16-byte chunks):
//   q_s [kBlockM, kD + 8]   rows of the tile, zero past head_dim / num_rows
//   k_s [kBlockN, kD + 8]   keys [n0, n0 + kBlockN), zero past kv_end
//   v_s [kBlockN, kD + 8]
// The 8-element row padding keeps ldmatrix's 8 row addresses in distinct
// 16-byte bank groups.
// An FP8 cache (KV = fp8_e4m3) adds the 8-bit copies of the K and V tiles,
//   k8_s, v8_s [kBlockN, kD] bytes,
// which cp.async fills (8-byte chunks); each thread converts exactly the
// chunks it copied into k_s / v_s (fp8_convert.cuh, exact), so only the
// barrier before the math is needed. Warp w owns tile rows [16 w, 16 w + 16); a thread owns
// rows (lane / 4) and (lane / 4 + 8) of that slab and, in every n8 tile of
// S or O, columns 2 (lane % 4) and 2 (lane % 4) + 1.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "backend/cuda/attention_tiles.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_convert.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/mma_helpers.cuh"

namespace pagoda::cuda {
namespace attention_detail {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockM = kAttentionBlockM;  // 16 rows per warp
// Four CTAs per SM for head dims <= 128 (<= 128 registers per thread, smem
// <= 52 KB): decode is latency bound, and with three (164 registers) ncu
// measured 19% occupancy and 39% of DRAM bandwidth at batch 256, 4k context.
// Larger head dims keep their registers (their accumulators alone need 128).
template <int kD>
constexpr int kMinBlocksPerSm = kD <= 128 ? 4 : 1;
static_assert(kBlockM == 16 * kWarps);

template <int kD>
struct TileShape {
  static constexpr int kBlockN = kD <= 128 ? 64 : 32;  // keys per tile
  static constexpr int kStride = kD + 8;               // smem row stride, elements
  static constexpr int kChunks = kD / 8;               // 16-byte chunks per row
  static_assert(kD % 16 == 0 && kD <= 256);
  // The 8-bit K and V tiles of an FP8 cache, after the 16-bit tiles.
  template <typename KV>
  static constexpr size_t staging_bytes() {
    return kIsFp8<KV> ? static_cast<size_t>(2 * kBlockN) * kD : 0;
  }
  template <typename T, typename KV = T>
  static constexpr size_t smem_bytes() {
    return static_cast<size_t>(kBlockM + 2 * kBlockN) * kStride * sizeof(T) + staging_bytes<KV>();
  }
};

// (k_scale, v_scale) of an FP8 cache, read on the device; (1, 1) otherwise.
template <typename KV>
__device__ __forceinline__ float2 kv_scales(const AttentionParams& p) {
  if constexpr (kIsFp8<KV>) {
    return make_float2(p.kv_scales[0], p.kv_scales[1]);
  } else {
    return make_float2(1.0f, 1.0f);
  }
}

// Converts the 8-element chunks `c` (row c / chunks, column 8 (c % chunks))
// of an 8-bit tile src_s [rows, kD] into dst_s [rows, stride] of T.
template <typename T, int kD, int kStride>
__device__ __forceinline__ void convert_chunk(const uint8_t* src_s, T* dst_s, int c) {
  constexpr int kChunks = kD / 8;
  const int r = c / kChunks;
  const int col = (c % kChunks) * 8;
  const uint2 q = *reinterpret_cast<const uint2*>(src_s + r * kD + col);
  *reinterpret_cast<uint4*>(dst_s + r * kStride + col) = e4m3x8_to<T>(q);
}

// What one CTA works on: sequence, kv head, row tile and its key range.
struct CtaWork {
  int seq;
  int kv_head;
  int split;
  int group;       // G = Hq / Hkv
  int q_begin;     // batch row of the sequence's first new token
  int num_rows;    // q_len * G
  int row0;        // first row of this tile
  int ctx_start;   // position of query 0 = seq_len - q_len
  int kv_begin;    // keys [kv_begin, kv_end) for this split
  int kv_end;
};

// The first tile of block_n keys that a query at position >= min_pos sees:
// with a sliding window, the tiles wholly before min_pos - window + 1 are
// skipped, never read (their block-table entries may be released:
// kNullBlock); 0 without a window.
__device__ __forceinline__ int first_visible_tile(int window, int min_pos, int block_n) {
  return window > 0 ? max(0, min_pos - window + 1) / block_n : 0;
}

// Returns false when the CTA has no rows (sequence shorter than the tile).
__device__ __forceinline__ bool cta_work(const AttentionParams& p, int block_n, CtaWork& w) {
  w.seq = blockIdx.z;
  w.kv_head = blockIdx.y / p.num_splits;
  w.split = blockIdx.y % p.num_splits;
  w.group = p.num_q_heads / p.num_kv_heads;
  w.q_begin = p.query_start_loc[w.seq];
  const int q_len = p.query_start_loc[w.seq + 1] - w.q_begin;
  const int seq_len = p.seq_lens[w.seq];
  w.num_rows = q_len * w.group;
  w.row0 = blockIdx.x * kBlockM;
  if (q_len <= 0 || w.row0 >= w.num_rows) return false;
  w.ctx_start = seq_len - q_len;
  const int last_row = min(w.num_rows, w.row0 + kBlockM) - 1;
  const int kv_len = min(seq_len, w.ctx_start + last_row / w.group + 1);
  const int first_tile = first_visible_tile(p.window, w.ctx_start + w.row0 / w.group, block_n);
  const int num_tiles = kv_len > 0 ? (kv_len + block_n - 1) / block_n - first_tile : 0;
  const int tiles_per_split = (num_tiles + p.num_splits - 1) / p.num_splits;
  w.kv_begin = (first_tile + w.split * tiles_per_split) * block_n;
  w.kv_end = min(kv_len, w.kv_begin + tiles_per_split * block_n);
  return true;
}

// Issues cp.async for the kRows Q rows of the tile (zero rows/columns
// outside); q_s has the row stride kD + 8.
template <typename T, int kD, int kRows = kBlockM>
__device__ __forceinline__ void load_q_tile(const AttentionParams& p, const CtaWork& w, T* q_s) {
  using S = TileShape<kD>;
  const T* qkv = static_cast<const T*>(p.qkv);
  for (int c = threadIdx.x; c < kRows * S::kChunks; c += kThreads) {
    const int r = c / S::kChunks;
    const int col = (c % S::kChunks) * 8;
    const int rr = w.row0 + r;
    const bool valid = rr < w.num_rows && col < p.head_dim;
    const T* src = qkv;
    if (valid) {
      const int64_t token = w.q_begin + rr / w.group;
      const int64_t head = static_cast<int64_t>(w.kv_head) * w.group + rr % w.group;
      src = qkv + token * p.row_width + head * p.head_dim + col;
    }
    cp_async_16(smem_addr(q_s + r * S::kStride + col), src, valid);
  }
}

// Issues cp.async for keys [n0, n0 + kBlockN) of `cache` (k or v) through the
// block table; rows past kv_end or with a bad block id are zero. KV = T:
// into dst_s [kBlockN, kStride] T; KV = fp8_e4m3: 8-byte chunks into
// dst_s [kBlockN, kD] bytes, thread threadIdx.x taking chunks threadIdx.x +
// kThreads i (the chunks it converts).
template <typename KV, int kD>
__device__ __forceinline__ void load_kv_tile(const AttentionParams& p, const CtaWork& w,
                                             const void* cache, int n0, KV* dst_s) {
  using S = TileShape<kD>;
  constexpr int kDstStride = kIsFp8<KV> ? kD : S::kStride;
  const KV* base = static_cast<const KV*>(cache);
  const int32_t* table = p.block_tables + static_cast<int64_t>(w.seq) * p.max_blocks_per_seq;
  for (int c = threadIdx.x; c < S::kBlockN * S::kChunks; c += kThreads) {
    const int r = c / S::kChunks;
    const int col = (c % S::kChunks) * 8;
    const int key = n0 + r;
    bool valid = key < w.kv_end && col < p.head_dim;
    const KV* src = base;
    if (valid) {
      const int logical = key / p.block_size;
      const int block = logical < p.max_blocks_per_seq ? table[logical] : -1;
      valid = block >= 0 && block < p.num_blocks;
      if (valid) {
        const int64_t slot = static_cast<int64_t>(block) * p.block_size + key % p.block_size;
        src = base + (slot * p.num_kv_heads + w.kv_head) * p.head_dim + col;
      }
    }
    if constexpr (kIsFp8<KV>) {
      cp_async_8(smem_addr(dst_s + r * kDstStride + col), src, valid);
    } else {
      cp_async_16(smem_addr(dst_s + r * kDstStride + col), src, valid);
    }
  }
}

// s_acc = Q_warp (16 x kD) * K_tile^T (kD x kBlockN).
template <typename T, int kD>
__device__ __forceinline__ void compute_scores(const T* q_s, const T* k_s, int warp, int lane,
                                               float (&s_acc)[TileShape<kD>::kBlockN / 8][4]) {
  using S = TileShape<kD>;
#pragma unroll
  for (int nt = 0; nt < S::kBlockN / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s_acc[nt][e] = 0.0f;
  }
  const T* q_row = q_s + (warp * 16 + (lane & 15)) * S::kStride + (lane >> 4) * 8;
  const T* k_row = k_s + ((lane & 7) + ((lane >> 4) << 3)) * S::kStride + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t a[4];
    ldmatrix_x4(a, smem_addr(q_row + kk * 16));
#pragma unroll
    for (int nn = 0; nn < S::kBlockN / 16; ++nn) {
      uint32_t b[4];
      ldmatrix_x4(b, smem_addr(k_row + nn * 16 * S::kStride + kk * 16));
      mma_16816<T>(s_acc[2 * nn], a, b[0], b[1]);
      mma_16816<T>(s_acc[2 * nn + 1], a, b[2], b[3]);
    }
  }
}

// o_acc += P (16 x kBlockN, from s_acc rounded to T) * V_tile (kBlockN x kD).
template <typename T, int kD>
__device__ __forceinline__ void accumulate_pv(const T* v_s, int lane,
                                              const float (&s_acc)[TileShape<kD>::kBlockN / 8][4],
                                              float (&o_acc)[kD / 8][4]) {
  using S = TileShape<kD>;
  const T* v_row = v_s + ((lane & 7) + ((lane >> 3) & 1) * 8) * S::kStride + (lane >> 4) * 8;
#pragma unroll
  for (int kk = 0; kk < S::kBlockN / 16; ++kk) {
    uint32_t a[4];
    a[0] = pack2<T>(s_acc[2 * kk][0], s_acc[2 * kk][1]);
    a[1] = pack2<T>(s_acc[2 * kk][2], s_acc[2 * kk][3]);
    a[2] = pack2<T>(s_acc[2 * kk + 1][0], s_acc[2 * kk + 1][1]);
    a[3] = pack2<T>(s_acc[2 * kk + 1][2], s_acc[2 * kk + 1][3]);
#pragma unroll
    for (int dn = 0; dn < kD / 16; ++dn) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, smem_addr(v_row + kk * 16 * S::kStride + dn * 16));
      mma_16816<T>(o_acc[2 * dn], a, b[0], b[1]);
      mma_16816<T>(o_acc[2 * dn + 1], a, b[2], b[3]);
    }
  }
}

// Per-thread online-softmax state of its two rows (h = 0: lane / 4, h = 1:
// lane / 4 + 8). m in log2 units; l is this thread's partial row sum (the
// quad's four partial sums are added at the end).
struct SoftmaxState {
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  int pos[2] = {-1, -1};  // query position of the row; -1: padding row
};

// How raw q.k products become scores in log2 units (from AttentionParams).
struct ScoreParams {
  float scale_log2 = 0.0f;      // scale * log2 e
  float scale_over_cap = 0.0f;  // scale / softcap; 0: no soft-capping
  float cap_log2 = 0.0f;        // softcap * log2 e
  int window = 0;               // > 0: sliding window

  // k_scale: an FP8 cache's, folded into the scale (q.(k8 * k_scale) =
  // k_scale q.k8).
  __host__ __device__ static ScoreParams from(const AttentionParams& p, float k_scale = 1.0f) {
    constexpr float kLog2e = 1.4426950408889634f;
    ScoreParams s;
    const float scale = p.scale * k_scale;
    s.scale_log2 = scale * kLog2e;
    if (p.softcap > 0.0f) {
      s.scale_over_cap = scale / p.softcap;
      s.cap_log2 = p.softcap * kLog2e;
    }
    s.window = p.window;
    return s;
  }
};

// Masks (kMask) and exponentiates s_acc in place (scores -> probabilities),
// updates m/l and rescales o_acc. Keys n0 + col valid iff < kv_end, <= row pos
// and, with a window, > pos - window; kMask = false compiles the comparisons
// out, for tiles the caller knows to be fully visible.
template <int kBlockN, int kD, bool kMask = true>
__device__ __forceinline__ void online_softmax(float (&s_acc)[kBlockN / 8][4],
                                               float (&o_acc)[kD / 8][4], SoftmaxState& st, int n0,
                                               int kv_end, int lane, const ScoreParams& sp) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
    const int lowest = sp.window > 0 ? st.pos[h] - sp.window + 1 : 0;
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float raw = s_acc[nt][2 * h + e];
        float x = sp.scale_over_cap > 0.0f ? sp.cap_log2 * tanhf(raw * sp.scale_over_cap)
                                           : raw * sp.scale_log2;
        if constexpr (kMask) {
          const int key = n0 + nt * 8 + 2 * (lane & 3) + e;
          x = key < kv_end && key <= st.pos[h] && key >= lowest ? x : -INFINITY;
        }
        s_acc[nt][2 * h + e] = x;
        mx = fmaxf(mx, x);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(st.m[h], mx);
    const float base = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = exp2f(st.m[h] - base);  // 0 while the row had no valid key
    st.m[h] = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pr = exp2f(s_acc[nt][2 * h + e] - base);
        s_acc[nt][2 * h + e] = pr;
        sum += pr;
      }
    }
    st.l[h] = st.l[h] * alpha + sum;
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      o_acc[dt][2 * h] *= alpha;
      o_acc[dt][2 * h + 1] *= alpha;
    }
  }
}

// The softmax sums l of the thread's two rows: each thread holds a partial
// sum; the quad of four lanes sharing a row adds them (every lane takes part).
__device__ __forceinline__ void quad_row_sums(const SoftmaxState& st, float (&row_sum)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] = st.l[h];
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
}

// Writes the thread's two rows of the m16 tile starting at row `tile_row`
// of the CTA tile: normalised T output (one split) or f32 partials (several
// splits), O times v_scale (an FP8 cache's; 1 otherwise).
template <typename T, int kD>
__device__ __forceinline__ void store_rows(const AttentionParams& p, const CtaWork& w, int tile_row,
                                           int lane, const SoftmaxState& st,
                                           const float (&o_acc)[kD / 8][4], float v_scale) {
  const int64_t num_q_heads = p.num_q_heads;
  float row_sum[2];
  quad_row_sums(st, row_sum);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int rr = w.row0 + tile_row + (lane >> 2) + 8 * h;
    if (rr >= w.num_rows) continue;
    const float l = row_sum[h];
    const int64_t token = w.q_begin + rr / w.group;
    const int64_t head = static_cast<int64_t>(w.kv_head) * w.group + rr % w.group;
    if (p.num_splits == 1) {
      const float inv = l > 0.0f ? v_scale / l : 0.0f;
      T* out = static_cast<T*>(p.out) + (token * num_q_heads + head) * p.head_dim;
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt) {
        const int d = dt * 8 + 2 * (lane & 3);
        if (d < p.head_dim) {
          *reinterpret_cast<uint32_t*>(out + d) =
              pack2<T>(o_acc[dt][2 * h] * inv, o_acc[dt][2 * h + 1] * inv);
        }
      }
    } else {
      const int64_t slot = (token * num_q_heads + head) * p.num_splits + w.split;
      float* out = p.partial_out + slot * p.head_dim;
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt) {
        const int d = dt * 8 + 2 * (lane & 3);
        if (d < p.head_dim) {
          *reinterpret_cast<float2*>(out + d) =
              make_float2(o_acc[dt][2 * h] * v_scale, o_acc[dt][2 * h + 1] * v_scale);
        }
      }
      if ((lane & 3) == 0) {
        *reinterpret_cast<float2*>(p.partial_ml + slot * 2) = make_float2(st.m[h], l);
      }
    }
  }
}

template <typename T, typename KV, int kD>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm<kD>)
    attention_tile_kernel(AttentionParams p) {
  pdl_enter();
  using S = TileShape<kD>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + kBlockM * S::kStride;
  T* v_s = k_s + S::kBlockN * S::kStride;
  // FP8 only: the 8-bit K and V tiles [kBlockN, kD].
  uint8_t* k8_s = reinterpret_cast<uint8_t*>(v_s + S::kBlockN * S::kStride);
  uint8_t* v8_s = k8_s + S::kBlockN * kD;

  CtaWork w;
  if (!cta_work(p, S::kBlockN, w)) return;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const bool warp_active = w.row0 + warp * 16 < w.num_rows;

  SoftmaxState st;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int rr = w.row0 + warp * 16 + (lane >> 2) + 8 * h;
    st.pos[h] = rr < w.num_rows ? w.ctx_start + rr / w.group : -1;
  }
  float o_acc[kD / 8][4];
#pragma unroll
  for (int dt = 0; dt < kD / 8; ++dt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[dt][e] = 0.0f;
  }
  const float2 scales = kv_scales<KV>(p);
  const ScoreParams sp = ScoreParams::from(p, scales.x);

  load_q_tile<T, kD>(p, w, q_s);
  cp_async_commit();
  for (int n0 = w.kv_begin; n0 < w.kv_end; n0 += S::kBlockN) {
    __syncthreads();  // the previous tile's k_s / v_s reads are done
    if constexpr (kIsFp8<KV>) {
      load_kv_tile<KV, kD>(p, w, p.k_cache, n0, reinterpret_cast<KV*>(k8_s));
      load_kv_tile<KV, kD>(p, w, p.v_cache, n0, reinterpret_cast<KV*>(v8_s));
      cp_async_commit();
      cp_async_wait<0>();  // this thread's chunks (and Q) landed
      for (int c = threadIdx.x; c < S::kBlockN * S::kChunks; c += kThreads) {
        convert_chunk<T, kD, S::kStride>(k8_s, k_s, c);
        convert_chunk<T, kD, S::kStride>(v8_s, v_s, c);
      }
      __syncthreads();
      if (warp_active) {
        float s_acc[S::kBlockN / 8][4];
        compute_scores<T, kD>(q_s, k_s, warp, lane, s_acc);
        online_softmax<S::kBlockN, kD>(s_acc, o_acc, st, n0, w.kv_end, lane, sp);
        accumulate_pv<T, kD>(v_s, lane, s_acc, o_acc);
      }
      continue;
    }
    load_kv_tile<T, kD>(p, w, p.k_cache, n0, k_s);
    cp_async_commit();
    load_kv_tile<T, kD>(p, w, p.v_cache, n0, v_s);
    cp_async_commit();
    cp_async_wait<1>();  // Q and K landed (V may still be in flight)
    __syncthreads();
    float s_acc[S::kBlockN / 8][4];
    if (warp_active) {
      compute_scores<T, kD>(q_s, k_s, warp, lane, s_acc);
      online_softmax<S::kBlockN, kD>(s_acc, o_acc, st, n0, w.kv_end, lane, sp);
    }
    cp_async_wait<0>();
    __syncthreads();
    if (warp_active) accumulate_pv<T, kD>(v_s, lane, s_acc, o_acc);
  }
  cp_async_wait<0>();
  store_rows<T, kD>(p, w, warp * 16, lane, st, o_acc, scales.y);
}

}  // namespace attention_detail

template <typename T, typename KV, int kHeadDim>
cudaError_t configure_attention_tiles() {
  using S = attention_detail::TileShape<kHeadDim>;
  return cudaFuncSetAttribute(attention_detail::attention_tile_kernel<T, KV, kHeadDim>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(S::template smem_bytes<T, KV>()));
}

template <typename T, typename KV, int kHeadDim>
cudaError_t launch_attention_tiles(const AttentionParams& p, cudaStream_t stream) {
  using S = attention_detail::TileShape<kHeadDim>;
  const int64_t m_tiles =
      ceil_div(static_cast<int64_t>(p.max_query_len) * (p.num_q_heads / p.num_kv_heads),
               attention_detail::kBlockM);
  const dim3 grid(static_cast<unsigned>(m_tiles),
                  static_cast<unsigned>(p.num_kv_heads * p.num_splits),
                  static_cast<unsigned>(p.num_seqs));
  return launch_kernel(attention_detail::attention_tile_kernel<T, KV, kHeadDim>, grid,
                       attention_detail::kThreads, S::template smem_bytes<T, KV>(), stream, p);
}

}  // namespace pagoda::cuda
