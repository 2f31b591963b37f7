// The prefill attention kernel (see attention.h for when it runs). Included
// only by the attention_d*.cu instantiation files (head dims <= 128).
//
// Same rows, fragments and math as the tile kernel (attention_kernel.cuh):
// row r of sequence s is (query j = r / G, q head kv_head * G + r % G), a
// thread owns rows (lane / 4) and (lane / 4 + 8) of an m16 tile and, in every
// n8 tile of S or O, columns 2 (lane % 4) and 2 (lane % 4) + 1; exp2 online
// softmax, P rounded to T, f32 accumulation, the same split partials.
// What differs:
//   - kBlockM = 128 rows per CTA, four warps of 32 rows = two m16 tiles each,
//     so every K/V B fragment loaded by ldmatrix feeds four mma instead of
//     two (the tile kernel is shared-memory bandwidth bound);
//   - K and V tiles (kBlockN = 64 keys) are double buffered: tile t + 1 is
//     issued (cp.async) right after the barrier that opens tile t, so its
//     load overlaps all of tile t's math; one __syncthreads per tile;
//   - the block-table lookups of tile t + 1 are made during tile t - 1 (one
//     load per thread of the first 64, stored to a small shared array at the
//     end of the tile), so no thread waits on a table read before issuing
//     its copies;
//   - the causal mask (and the kv_end mask) is applied only on tiles that
//     cross the warp's diagonal or the end of the keys; a warp whose 32 rows
//     all lie before a tile's first key skips that tile's math;
//   - m tiles run heaviest first (blockIdx.y reversed, y the slowest grid
//     dimension), so the long causal rows start in the first wave.
//
// Shared memory (kStride = kD + 8 elements; the padding keeps ldmatrix's
// eight row addresses in distinct 16-byte bank groups):
//   q_s [128, kStride]   k_s [2][64, kStride]   v_s [2][64, kStride]
// = 384 kStride * sizeof(T) bytes dynamic (+ 512 bytes static: the cache
// slots of two key tiles): kD 32: 30,720, 64: 55,296, 96: 79,872,
// 128: 104,448; so at kD 128 two CTAs (8 warps) fit per SM (228 KB per SM,
// 1 KB reserved per CTA), which __launch_bounds__(128, 2) asks for (<= 255
// registers per thread). Q stays in shared memory and is re-read per k16
// step (two ldmatrix per four B fragments): Q fragments in registers would
// add 64 registers at kD 128.
// Registers per thread (nvcc -Xptxas -v, sm_90a, bf16 and f16 alike; 255 is
// the cap __launch_bounds__(128, 2) allows): kD 32: 187, 64: 235, 96: 235,
// no spills; kD 128: 255 with 72 bytes of spill stores / 64 of spill loads
// (O 128 + S 64 f32 accumulators). Reducing this (BlockN 32 did not help)
// is open: check on the device (ncu local-memory traffic) whether it costs.
// So two CTAs (8 warps) per SM for every head dim.
//
// An FP8 cache (KV = fp8_e4m3): the double buffers hold the 8-bit tiles,
//   k8_s [2][64, kD] bytes   v8_s [2][64, kD] bytes
// (cp.async, 8-byte chunks), and one pair of 16-bit tiles k_s, v_s
// [64, kStride] takes the converted tile: after the barrier that opens tile
// t (and issues tile t + 1), each thread converts the chunks it copied, and
// a second barrier precedes the math. Dynamic bytes: (128 + 128) kStride *
// sizeof(T) + 256 kD: kD 128: 102,400. k_scale is folded into the score
// scale, v_scale into the output.
//
// Contracts (the tile kernel's): keys >= kv_end are never read (zero
// filled), a block id < 0 or >= num_blocks reads as a zero key/value (the key
// still takes part in the softmax), rows outside the sequence's rows are
// never written (so tokens outside [qsl[0], qsl[num_seqs]) stay untouched),
// the grid comes from the host hints and each CTA reads the real lengths on
// the device and exits when it has no rows. The launcher only picks this
// kernel when num_blocks * block_size < 2^31 (cache slots fit in int32).
#pragma once

#include "backend/cuda/attention_kernel.cuh"

namespace pagoda::cuda {
namespace attention_prefill_detail {

using attention_detail::CtaWork;
using attention_detail::first_visible_tile;
using attention_detail::online_softmax;
using attention_detail::ScoreParams;
using attention_detail::SoftmaxState;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockM = kAttentionPrefillBlockM;  // 32 rows (two m16 tiles) per warp
constexpr int kWarpRows = kBlockM / kWarps;
constexpr int kMTiles = kWarpRows / 16;
constexpr int kBlockN = kAttentionPrefillBlockN;  // keys per K/V tile
constexpr int kMinBlocksPerSm = 2;
static_assert(kWarpRows == 32 && kMTiles == 2 && kBlockN == 64);

template <int kD, typename KV>
struct PrefillShape {
  static constexpr bool kFp8 = kIsFp8<KV>;
  static_assert(kD % 16 == 0 && kD <= 128);
  static constexpr int kStride = kD + 8;   // smem row stride, elements
  static constexpr int kChunks = kD / 8;   // 16-byte chunks per row
  static constexpr int kTileElems = kBlockN * kStride;
  // 16-byte chunks of one K (or V) tile per thread; chunk c = tid + kThreads i
  // is row c / kChunks, column 8 (c % kChunks).
  static constexpr int kChunksPerThread = kBlockN * kChunks / kThreads;
  static_assert(kBlockN * kChunks % kThreads == 0);
  // 16-bit K/V tiles: two double buffers, or one converted pair for FP8.
  static constexpr int kKvTiles = kFp8 ? 2 : 4;
  // FP8: the 8-bit double buffers, [2][K, V][kBlockN, kD] bytes.
  static constexpr size_t kStagingBytes = kFp8 ? static_cast<size_t>(4 * kBlockN) * kD : 0;
  template <typename T>
  static constexpr size_t smem_bytes() {
    return static_cast<size_t>(kBlockM + kKvTiles * kBlockN) * kStride * sizeof(T) + kStagingBytes;
  }
};

// The CTA's work; blockIdx.x = (seq * Hkv + kv_head) * num_splits + split,
// blockIdx.y = m tile counted from the last (the heaviest causal rows first).
// Returns false when the CTA has no rows.
__device__ __forceinline__ bool prefill_work(const AttentionParams& p, CtaWork& w) {
  const int x = blockIdx.x;
  w.split = x % p.num_splits;
  w.kv_head = (x / p.num_splits) % p.num_kv_heads;
  w.seq = x / (p.num_splits * p.num_kv_heads);
  w.group = p.num_q_heads / p.num_kv_heads;
  w.q_begin = p.query_start_loc[w.seq];
  const int q_len = p.query_start_loc[w.seq + 1] - w.q_begin;
  const int seq_len = p.seq_lens[w.seq];
  w.num_rows = q_len * w.group;
  w.row0 = (gridDim.y - 1 - blockIdx.y) * kBlockM;
  if (q_len <= 0 || w.row0 >= w.num_rows) return false;
  w.ctx_start = seq_len - q_len;
  const int last_row = min(w.num_rows, w.row0 + kBlockM) - 1;
  const int kv_len = min(seq_len, w.ctx_start + last_row / w.group + 1);
  const int first_tile = first_visible_tile(p.window, w.ctx_start + w.row0 / w.group, kBlockN);
  const int num_tiles = kv_len > 0 ? (kv_len + kBlockN - 1) / kBlockN - first_tile : 0;
  const int tiles_per_split = (num_tiles + p.num_splits - 1) / p.num_splits;
  w.kv_begin = (first_tile + w.split * tiles_per_split) * kBlockN;
  w.kv_end = min(kv_len, w.kv_begin + tiles_per_split * kBlockN);
  return true;
}

// Cache slot (block * block_size + key % block_size) of `key`, -1 for a key
// >= kv_end (never read) or a bad block id (reads as zero).
__device__ __forceinline__ int key_slot(const AttentionParams& p, const CtaWork& w,
                                        const int32_t* table, int key) {
  if (key >= w.kv_end) return -1;
  const int logical = key / p.block_size;
  const int block = logical < p.max_blocks_per_seq ? table[logical] : -1;
  return block >= 0 && block < p.num_blocks ? block * p.block_size + key % p.block_size : -1;
}

// Issues cp.async for the K and V tiles of the keys whose cache slots are in
// slot_s[kBlockN]: 16-byte chunks into [kBlockN, kStride] T tiles, or for
// FP8 8-byte chunks into [kBlockN, kD] byte tiles; thread tid copies chunks
// tid + kThreads i (the ones it converts).
template <typename T, typename KV, int kD>
__device__ __forceinline__ void issue_kv(const AttentionParams& p, const CtaWork& w,
                                         const int* slot_s, unsigned char* k_dst,
                                         unsigned char* v_dst) {
  using S = PrefillShape<kD, KV>;
  const KV* k_base = static_cast<const KV*>(p.k_cache);
  const KV* v_base = static_cast<const KV*>(p.v_cache);
#pragma unroll
  for (int i = 0; i < S::kChunksPerThread; ++i) {
    const int c = threadIdx.x + kThreads * i;
    const int r = c / S::kChunks;
    const int col = (c % S::kChunks) * 8;
    const int slot = slot_s[r];
    const bool valid = slot >= 0 && col < p.head_dim;
    const int64_t src =
        valid ? (static_cast<int64_t>(slot) * p.num_kv_heads + w.kv_head) * p.head_dim + col : 0;
    if constexpr (S::kFp8) {
      cp_async_8(smem_addr(k_dst + r * kD + col), k_base + src, valid);
      cp_async_8(smem_addr(v_dst + r * kD + col), v_base + src, valid);
    } else {
      T* k = reinterpret_cast<T*>(k_dst);
      T* v = reinterpret_cast<T*>(v_dst);
      cp_async_16(smem_addr(k + r * S::kStride + col), k_base + src, valid);
      cp_async_16(smem_addr(v + r * S::kStride + col), v_base + src, valid);
    }
  }
}

template <typename T, typename KV, int kD>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    attention_prefill_kernel(AttentionParams p) {
  pdl_enter();
  using S = PrefillShape<kD, KV>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + kBlockM * S::kStride;             // [2][kBlockN, kStride] (FP8: [1][...])
  T* v_s = k_s + S::kKvTiles / 2 * S::kTileElems;  // the same
  // FP8 only: the 8-bit double buffers [2][kBlockN, kD] each.
  unsigned char* k8_s = reinterpret_cast<unsigned char*>(v_s + S::kKvTiles / 2 * S::kTileElems);
  unsigned char* v8_s = k8_s + 2 * kBlockN * kD;
  // Where tile buffer b is copied to.
  auto k_dst = [&](int b) {
    return S::kFp8 ? k8_s + b * kBlockN * kD
                   : reinterpret_cast<unsigned char*>(k_s + b * S::kTileElems);
  };
  auto v_dst = [&](int b) {
    return S::kFp8 ? v8_s + b * kBlockN * kD
                   : reinterpret_cast<unsigned char*>(v_s + b * S::kTileElems);
  };

  CtaWork w;
  if (!prefill_work(p, w)) return;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int warp_row0 = w.row0 + warp * kWarpRows;  // first row of this warp
  const bool warp_active = warp_row0 < w.num_rows;
  // Query positions of the warp's first and last real rows: keys <= min_pos
  // need no causal mask for any of its rows, keys > max_pos none of them sees.
  const int min_pos = w.ctx_start + warp_row0 / w.group;
  const int max_pos = w.ctx_start + (min(w.num_rows, warp_row0 + kWarpRows) - 1) / w.group;

  SoftmaxState st[kMTiles];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = warp_row0 + mt * 16 + (lane >> 2) + 8 * h;
      st[mt].pos[h] = rr < w.num_rows ? w.ctx_start + rr / w.group : -1;
    }
  }
  float o_acc[kMTiles][kD / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[mt][dt][e] = 0.0f;
    }
  }
  const float2 scales = attention_detail::kv_scales<KV>(p);  // (k_scale, v_scale)
  const ScoreParams sp = ScoreParams::from(p, scales.x);
  const int32_t* table = p.block_tables + static_cast<int64_t>(w.seq) * p.max_blocks_per_seq;

  // Cache slots of the keys of the next two tiles, double buffered: threads
  // < kBlockN look up the slots of tile t + 2 (a plain load held in one
  // register through tile t's math) and store them at the end of tile t;
  // every thread reads them after the barrier that opens tile t + 1, to
  // issue tile t + 2's copies. So no thread waits on a table read.
  __shared__ int slot_s[2][kBlockN];
  const bool slot_thread = threadIdx.x < kBlockN;
  if (slot_thread) {
    slot_s[0][threadIdx.x] = key_slot(p, w, table, w.kv_begin + threadIdx.x);
    slot_s[1][threadIdx.x] = key_slot(p, w, table, w.kv_begin + kBlockN + threadIdx.x);
  }
  // Prologue: Q and the first K/V tile in one group.
  attention_detail::load_q_tile<T, kD, kBlockM>(p, w, q_s);
  __syncthreads();
  if (w.kv_begin < w.kv_end) issue_kv<T, KV, kD>(p, w, slot_s[0], k_dst(0), v_dst(0));
  cp_async_commit();

  // ldmatrix row addresses (see attention_kernel.cuh's compute_scores and
  // accumulate_pv for the fragment layouts).
  const T* q_row = q_s + (warp * kWarpRows + (lane & 15)) * S::kStride + (lane >> 4) * 8;
  const int k_off = ((lane & 7) + ((lane >> 4) << 3)) * S::kStride + ((lane >> 3) & 1) * 8;
  const int v_off = ((lane & 7) + ((lane >> 3) & 1) * 8) * S::kStride + (lane >> 4) * 8;

  int buf = 0;
  for (int n0 = w.kv_begin; n0 < w.kv_end; n0 += kBlockN, buf ^= 1) {
    cp_async_wait<0>();  // this thread's copies of tile n0 (and Q) landed
    __syncthreads();     // everyone's did; tile n0 - kBlockN's buffers are free;
                         // slot_s[buf ^ 1] holds tile n0 + kBlockN's slots
    if (n0 + kBlockN < w.kv_end) {
      issue_kv<T, KV, kD>(p, w, slot_s[buf ^ 1], k_dst(buf ^ 1), v_dst(buf ^ 1));
      cp_async_commit();
    }
    // The 16-bit tiles this tile's math reads: buffer buf, or for FP8 the
    // converted pair (this thread's chunks of tile n0 landed: the wait above).
    int tile = buf;
    if constexpr (S::kFp8) {
#pragma unroll
      for (int i = 0; i < S::kChunksPerThread; ++i) {
        const int c = threadIdx.x + kThreads * i;
        attention_detail::convert_chunk<T, kD, S::kStride>(k8_s + buf * kBlockN * kD, k_s, c);
        attention_detail::convert_chunk<T, kD, S::kStride>(v8_s + buf * kBlockN * kD, v_s, c);
      }
      __syncthreads();  // every thread's chunks converted
      tile = 0;
    }
    // Tile n0 + 2 kBlockN's slot; stored in slot_s[buf] (tile n0's, read
    // before the barrier above) at the end of this tile.
    const int next_slot =
        slot_thread ? key_slot(p, w, table, n0 + 2 * kBlockN + threadIdx.x) : -1;
    if (!warp_active || n0 > max_pos) {  // every key of the tile is masked for the warp
      if (slot_thread) slot_s[buf][threadIdx.x] = next_slot;
      continue;
    }
    // Shared-memory addresses of this lane's ldmatrix rows in Q, K, V.
    const uint32_t q_addr = smem_addr(q_row);
    const uint32_t k_addr = smem_addr(k_s + tile * S::kTileElems + k_off);
    const uint32_t v_addr = smem_addr(v_s + tile * S::kTileElems + v_off);

    // S = Q K^T for the warp's two m16 tiles.
    float s_acc[kMTiles][kBlockN / 8][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s_acc[mt][nt][e] = 0.0f;
      }
    }
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        ldmatrix_x4(a[mt], q_addr + (mt * 16 * S::kStride + kk * 16) * sizeof(T));
      }
#pragma unroll
      for (int nn = 0; nn < kBlockN / 16; ++nn) {
        uint32_t b[4];
        ldmatrix_x4(b, k_addr + (nn * 16 * S::kStride + kk * 16) * sizeof(T));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(s_acc[mt][2 * nn], a[mt], b[0], b[1]);
          mma_16816<T>(s_acc[mt][2 * nn + 1], a[mt], b[2], b[3]);
        }
      }
    }

    // Only tiles that cross the warp's diagonal or the end of the keys mask
    // (every tile with a sliding window).
    if (sp.window > 0 || n0 + kBlockN - 1 > min_pos || n0 + kBlockN > w.kv_end) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        online_softmax<kBlockN, kD, true>(s_acc[mt], o_acc[mt], st[mt], n0, w.kv_end, lane, sp);
      }
    } else {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        online_softmax<kBlockN, kD, false>(s_acc[mt], o_acc[mt], st[mt], n0, w.kv_end, lane, sp);
      }
    }

    // O += P V (P rounded to T).
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        a[mt][0] = pack2<T>(s_acc[mt][2 * kk][0], s_acc[mt][2 * kk][1]);
        a[mt][1] = pack2<T>(s_acc[mt][2 * kk][2], s_acc[mt][2 * kk][3]);
        a[mt][2] = pack2<T>(s_acc[mt][2 * kk + 1][0], s_acc[mt][2 * kk + 1][1]);
        a[mt][3] = pack2<T>(s_acc[mt][2 * kk + 1][2], s_acc[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dn = 0; dn < kD / 16; ++dn) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_addr + (kk * 16 * S::kStride + dn * 16) * sizeof(T));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(o_acc[mt][2 * dn], a[mt], b[0], b[1]);
          mma_16816<T>(o_acc[mt][2 * dn + 1], a[mt], b[2], b[3]);
        }
      }
    }
    if (slot_thread) slot_s[buf][threadIdx.x] = next_slot;
  }
  cp_async_wait<0>();  // nothing may be in flight when the CTA exits
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    attention_detail::store_rows<T, kD>(p, w, warp * kWarpRows + mt * 16, lane, st[mt], o_acc[mt],
                                        scales.y);
  }
}

}  // namespace attention_prefill_detail

template <typename T, typename KV, int kHeadDim>
cudaError_t configure_attention_prefill() {
  using S = attention_prefill_detail::PrefillShape<kHeadDim, KV>;
  return cudaFuncSetAttribute(attention_prefill_detail::attention_prefill_kernel<T, KV, kHeadDim>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(S::template smem_bytes<T>()));
}

template <typename T, typename KV, int kHeadDim>
cudaError_t launch_attention_prefill(const AttentionParams& p, cudaStream_t stream) {
  using S = attention_prefill_detail::PrefillShape<kHeadDim, KV>;
  const int64_t m_tiles = attention_prefill_m_tiles(p);
  const int64_t x = static_cast<int64_t>(p.num_seqs) * p.num_kv_heads * p.num_splits;
  if (m_tiles <= 0 || m_tiles > 65535 || x > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(m_tiles), 1);
  return launch_kernel(attention_prefill_detail::attention_prefill_kernel<T, KV, kHeadDim>, grid,
                       attention_prefill_detail::kThreads, S::template smem_bytes<T>(), stream, p);
}

}  // namespace pagoda::cuda
