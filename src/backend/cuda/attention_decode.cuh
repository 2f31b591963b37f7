// The decode attention kernel (see attention.h for when it runs). Included
// only by the attention_d*.cu instantiation files.
//
// A CTA = (kv head, split, sequence) of a batch where every sequence has one
// new token; its rows are the G = Hq / Hkv query heads of the group (G <= 16,
// padded to one m16 tile with zero rows). The CTA's keys [kv_begin, kv_end)
// are cut into tiles of kBlockN = 16 keys and warp w takes tiles w, w + 4,
// w + 8, ... (the four warps read adjacent tiles at any time). Each warp runs
// its own cp.async pipeline of kStages K/V tile pairs in its own shared-memory
// region, synchronised with cp.async.wait_group and __syncwarp only; so a CTA
// keeps up to 4 * kStages tiles in flight instead of the tile kernel's one.
// Every warp holds the same Q fragments (registers, loaded once) and its own
// online-softmax state (m, l, O) over its tiles; at the end the four states
// are merged through shared memory (the combine kernel's math) and the CTA
// writes the normalised output (one split) or the split's partials (same
// layout as the tile kernel, merged by the same combine kernel).
//
// Shared memory (kS = kD + 8 elements per row, the padding keeps ldmatrix's
// eight row addresses in distinct 16-byte bank groups):
//   q_s                    [16, kS] T        the group's query rows
//   warp w region          [kStages][K, V][16, kS] T
//     reused at the end as [16, kS] f32 O and [16][2] f32 (m, l)
// Bytes per CTA: 2 * 16 kS * (1 + 4 warps * kStages * 2) = 544 kS (kStages 2):
//   kD  32:  21,760   64:  39,168   96:  56,576
//   kD 128:  73,984  192: 108,800  256: 143,616
// so 10 / 5 / 4 / 3 / 2 / 1 CTAs fit per SM by shared memory (228 KB per SM,
// 1 KB reserved per CTA); __launch_bounds__ asks for that many, capped at 4.
// Registers per thread (nvcc -Xptxas -v, sm_90a, CUDA 13.0, bf16 and f16
// alike), no spills: kD 32: 84, 64: 110, 96: 128, 128: 154, 192: 230,
// 256: 190; so 5 / 4 / 4 / 3 / 2 / 1 CTAs (20 / 16 / 16 / 12 / 8 / 4 warps)
// per SM, whichever of registers and shared memory binds.
//
// An FP8 cache (KV = fp8_e4m3), the staged path (taken for head dims not a
// multiple of 16 and with PAGODA_FP8_KV_DECODE=old; attention_decode_fp8.cuh,
// which converts in registers, is the default): the stages hold the 8-bit
// tiles instead,
//   warp w region          [kStages][K, V][16, kD] bytes, then [K, V][16, kS] T
// which cp.async fills with 8-byte chunks; when tile i has landed each lane
// converts exactly the chunks it copied into the 16-bit K and V tiles after
// the stages (fp8_convert.cuh, exact), then refills the stage before the
// math (its reads are done), and __syncwarp precedes the ldmatrix. Half the
// global bytes per key; k_scale is folded into the score scale and v_scale
// into the output. Bytes per CTA: 32 kS + 4 * (64 kD + 64 kS) (kStages 2):
//   kD  32:  19,712   64:  37,120   96:  54,528
//   kD 128:  71,936  192: 106,752  256: 141,568
//
// Fragment layouts are the tile kernel's (attention_kernel.cuh): a thread
// owns rows (lane / 4) and (lane / 4 + 8) of the 16 rows and, in every n8
// tile of S or O, columns 2 (lane % 4) and 2 (lane % 4) + 1.
//
// Contracts kept from the tile kernel: keys >= kv_end are never read (zero
// filled), a block id < 0 or >= num_blocks reads as a zero key/value (the key
// still takes part in the softmax), rows of tokens outside
// [qsl[0], qsl[num_seqs]) are never written, and the grid comes from host
// hints (num_seqs, num_splits) while each CTA reads the real lengths on the
// device: a sequence whose query length is not 1 (an empty slot of a graph
// replayed on a smaller batch) has no CTA work.
#pragma once

#include "backend/cuda/attention_kernel.cuh"

namespace pagoda::cuda {
namespace attention_decode_detail {

using attention_detail::first_visible_tile;
using attention_detail::online_softmax;
using attention_detail::ScoreParams;
using attention_detail::SoftmaxState;

constexpr int kWarps = kAttentionDecodeWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockN = kAttentionDecodeBlockN;  // keys per warp tile
constexpr int kRows = 16;                        // one m16 tile of query heads
constexpr int kStages = 2;                       // K/V tiles in flight per warp
static_assert(kBlockN == 16, "one k16 step of P V per tile");
static_assert(kAttentionDecodeMaxGroup <= kRows);

template <typename T, typename KV, int kD>
struct DecodeShape {
  static_assert(kD % 16 == 0 && kD <= 256);
  static constexpr bool kFp8 = kIsFp8<KV>;
  static constexpr int kStride = kD + 8;                     // smem row stride, elements
  static constexpr int kChunks = kD / 8;                     // 16-byte chunks per row
  static constexpr int kChunksPerLane = kBlockN * kChunks / 32;  // of one K (or V) tile
  static_assert(kBlockN * kChunks % 32 == 0);
  // Q fragments stay in registers up to kD 192 (kD 256's 128 O accumulators
  // leave no room: it re-reads them from q_s every tile).
  static constexpr bool kQInRegs = kD <= 192;
  static constexpr int kTileElems = kBlockN * kStride;       // one K or V tile
  static constexpr size_t kQBytes = static_cast<size_t>(kRows) * kStride * sizeof(T);
  // One stage's K (or V) tile in the cache's type: [16, kStride] T, or
  // [16, kD] bytes for FP8, whose converted K and V tiles follow the stages.
  static constexpr size_t kStageTileBytes =
      kFp8 ? static_cast<size_t>(kBlockN) * kD : static_cast<size_t>(kTileElems) * sizeof(T);
  static constexpr size_t kConvertedBytes =
      kFp8 ? 2 * static_cast<size_t>(kTileElems) * sizeof(T) : 0;
  static constexpr size_t kWarpRegionBytes = kStages * 2 * kStageTileBytes + kConvertedBytes;
  static constexpr size_t kSmemBytes = kQBytes + kWarps * kWarpRegionBytes;
  // The end-of-CTA merge reuses the warp's region: O [16, kStride] f32 + (m, l).
  static_assert(static_cast<size_t>(kRows) * kStride * sizeof(float) + kRows * 2 * sizeof(float) <=
                kWarpRegionBytes);
  // CTAs per SM that shared memory allows (228 KB per SM, 1 KB reserved per
  // CTA), capped at 4: the __launch_bounds__ minimum (so registers <= 65536 /
  // (128 * this)).
  static constexpr int kSmemFit = static_cast<int>(size_t{228 * 1024} / (kSmemBytes + 1024));
  static constexpr int kMinBlocksPerSm = kSmemFit >= 4 ? 4 : (kSmemFit < 1 ? 1 : kSmemFit);
};

// What one CTA works on.
struct DecodeWork {
  int seq;
  int kv_head;
  int split;
  int group;     // G
  int q_begin;   // batch row of the sequence's token
  int seq_len;   // keys [0, seq_len) are its context
  int tile_begin;  // 16-key tiles [tile_begin, tile_end) for this split, from the window's
  int tile_end;
  int kv_end;    // min(seq_len, 16 tile_end)
};

// Returns false when the sequence has no single new token (no work).
__device__ __forceinline__ bool decode_work(const AttentionParams& p, DecodeWork& w) {
  w.kv_head = blockIdx.x % p.num_kv_heads;
  w.split = blockIdx.x / p.num_kv_heads;
  w.seq = blockIdx.z;
  w.group = p.num_q_heads / p.num_kv_heads;
  w.q_begin = p.query_start_loc[w.seq];
  if (p.query_start_loc[w.seq + 1] - w.q_begin != 1) return false;
  w.seq_len = p.seq_lens[w.seq];
  const int end_tile = w.seq_len > 0 ? (w.seq_len + kBlockN - 1) / kBlockN : 0;
  const int first_tile = min(end_tile, first_visible_tile(p.window, w.seq_len - 1, kBlockN));
  const int tiles_per_split = (end_tile - first_tile + p.num_splits - 1) / p.num_splits;
  w.tile_begin = min(end_tile, first_tile + w.split * tiles_per_split);
  w.tile_end = min(end_tile, w.tile_begin + tiles_per_split);
  w.kv_end = min(w.seq_len, w.tile_end * kBlockN);
  return true;
}

// Element offset of key `key`'s row (this kv head) in the k/v cache, or -1
// when the key is >= kv_end (not read) or its block id is bad (zero row).
__device__ __forceinline__ int64_t kv_row_offset(const AttentionParams& p, const int32_t* table,
                                                 int kv_head, int key, int kv_end) {
  if (key >= kv_end) return -1;
  const int logical = key / p.block_size;
  const int block = logical < p.max_blocks_per_seq ? table[logical] : -1;
  if (block < 0 || block >= p.num_blocks) return -1;
  const int64_t slot = static_cast<int64_t>(block) * p.block_size + key % p.block_size;
  return (slot * p.num_kv_heads + kv_head) * p.head_dim;
}

// Issues cp.async for one K tile and one V tile (16 keys): lane r < 16 holds
// the row offset of key r (row_off, -1: zero row); consecutive lanes copy
// consecutive chunks of 8 elements of a row (16 bytes, or 8 for FP8 into a
// [16, kD] byte tile), so one instruction reads whole rows. Lane l copies
// chunks l + 32 i.
template <typename T, typename KV, int kD>
__device__ __forceinline__ void issue_kv_tile(const AttentionParams& p, int64_t row_off, int lane,
                                              unsigned char* k_dst, unsigned char* v_dst) {
  using S = DecodeShape<T, KV, kD>;
  const KV* k_base = static_cast<const KV*>(p.k_cache);
  const KV* v_base = static_cast<const KV*>(p.v_cache);
#pragma unroll
  for (int i = 0; i < S::kChunksPerLane; ++i) {
    const int c = lane + 32 * i;
    const int r = c / S::kChunks;
    const int col = (c % S::kChunks) * 8;
    const long long off = __shfl_sync(0xffffffffu, static_cast<long long>(row_off), r);
    const bool valid = off >= 0 && col < p.head_dim;
    const int64_t src = valid ? off + col : 0;
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

// FP8: converts the chunks lane `lane` copied (issue_kv_tile) of one stage's
// 8-bit K and V tiles into the 16-bit tiles k_s, v_s [16, kStride].
template <typename T, typename KV, int kD>
__device__ __forceinline__ void convert_kv_tile(const unsigned char* k8, const unsigned char* v8,
                                                int lane, T* k_s, T* v_s) {
  using S = DecodeShape<T, KV, kD>;
#pragma unroll
  for (int i = 0; i < S::kChunksPerLane; ++i) {
    attention_detail::convert_chunk<T, kD, S::kStride>(k8, k_s, lane + 32 * i);
    attention_detail::convert_chunk<T, kD, S::kStride>(v8, v_s, lane + 32 * i);
  }
}

// Merges the kWarps warps' online-softmax states and writes the CTA's
// result. Warp k's region, at o_all + k * region_floats, holds its O
// [16, kD + 8] f32 (unnormalised) then its (m, l) [16][2] (rows >= G unused);
// the caller wrote them and passed __syncthreads. Writes the normalised output
// times v_scale (one split) or the split's f32 partials (O times v_scale, m,
// l), the tile kernel's layout.
template <typename T, int kD>
__device__ __forceinline__ void merge_warp_states(const AttentionParams& p, const DecodeWork& w,
                                                  const float* o_all, size_t region_floats,
                                                  float v_scale) {
  constexpr int kStride = kD + 8;
  const int64_t num_q_heads = p.num_q_heads;
  for (int item = threadIdx.x; item < w.group * (kD / 2); item += kThreads) {
    const int r = item / (kD / 2);
    const int d = 2 * (item % (kD / 2));
    if (d >= p.head_dim) continue;
    float m_w[kWarps], l_w[kWarps];
    float m_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) {
      const float2 ml = *reinterpret_cast<const float2*>(o_all + k * region_floats + kRows * kStride + 2 * r);
      m_w[k] = ml.x;
      l_w[k] = ml.y;
      m_max = fmaxf(m_max, ml.x);
    }
    float l = 0.0f;
    float2 o = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < kWarps; ++k) {
      // 0 for a warp without a valid key (m = -inf, O = 0, l = 0).
      const float wgt = m_max == -INFINITY ? 0.0f : exp2f(m_w[k] - m_max);
      const float2 ok = *reinterpret_cast<const float2*>(o_all + k * region_floats + r * kStride + d);
      l += wgt * l_w[k];
      o.x += wgt * ok.x;
      o.y += wgt * ok.y;
    }
    const int64_t token = w.q_begin;
    const int64_t head = static_cast<int64_t>(w.kv_head) * w.group + r;
    if (p.num_splits == 1) {
      const float inv = l > 0.0f ? v_scale / l : 0.0f;
      T* out = static_cast<T*>(p.out) + (token * num_q_heads + head) * p.head_dim;
      *reinterpret_cast<uint32_t*>(out + d) = pack2<T>(o.x * inv, o.y * inv);
    } else {
      const int64_t slot = (token * num_q_heads + head) * p.num_splits + w.split;
      *reinterpret_cast<float2*>(p.partial_out + slot * p.head_dim + d) =
          make_float2(o.x * v_scale, o.y * v_scale);
      if (d == 0) *reinterpret_cast<float2*>(p.partial_ml + slot * 2) = make_float2(m_max, l);
    }
  }
}

// The pieces both decode kernels (this one and attention_decode_fp8.cuh)
// share around their key loop.
// Q's A fragments of the warp's 16 rows from q_s (q_row: this lane's
// ldmatrix address), loaded once where they stay in registers (kInRegs).
template <int kD, bool kInRegs, typename T>
__device__ __forceinline__ void load_q_frags(const T* q_row,
                                             uint32_t (&q_frag)[kInRegs ? kD / 16 : 1][4]) {
  if constexpr (kInRegs) {
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) ldmatrix_x4(q_frag[kk], smem_addr(q_row + kk * 16));
  }
}

// A warp's online-softmax state for this lane's rows (rows >= G take no
// keys) and its zeroed O accumulator.
template <int kD>
__device__ __forceinline__ void init_row_state(const DecodeWork& w, int lane, SoftmaxState& st,
                                               float (&o_acc)[kD / 8][4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = (lane >> 2) + 8 * h;
    st.pos[h] = r < w.group ? w.seq_len - 1 : -1;  // every key < kv_end <= seq_len is visible
  }
#pragma unroll
  for (int dt = 0; dt < kD / 8; ++dt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[dt][e] = 0.0f;
  }
}

// P (a 16-key tile's scores after the online softmax) rounded to T as the
// A fragment of O += P V (like the tile kernel).
template <typename T>
__device__ __forceinline__ void pack_p(const float (&s_acc)[kBlockN / 8][4], uint32_t (&a)[4]) {
  a[0] = pack2<T>(s_acc[0][0], s_acc[0][1]);
  a[1] = pack2<T>(s_acc[0][2], s_acc[0][3]);
  a[2] = pack2<T>(s_acc[1][0], s_acc[1][1]);
  a[3] = pack2<T>(s_acc[1][2], s_acc[1][3]);
}

template <typename T, typename KV, int kD>
__global__ void __launch_bounds__(kThreads, (DecodeShape<T, KV, kD>::kMinBlocksPerSm))
    attention_decode_kernel(AttentionParams p) {
  pdl_enter();
  using S = DecodeShape<T, KV, kD>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);

  DecodeWork w;
  if (!decode_work(p, w)) return;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  unsigned char* region = smem_raw + S::kQBytes + warp * S::kWarpRegionBytes;
  unsigned char* k_stage = region;  // [kStages] K tiles of kStageTileBytes
  unsigned char* v_stage = k_stage + kStages * S::kStageTileBytes;
  // FP8 only: the converted K and V tiles [16, kStride] T.
  T* k_conv = reinterpret_cast<T*>(v_stage + kStages * S::kStageTileBytes);
  T* v_conv = k_conv + S::kTileElems;

  // Q rows (zero past G and head_dim); group 0 of every thread.
  const T* qkv = static_cast<const T*>(p.qkv);
  for (int c = threadIdx.x; c < kRows * S::kChunks; c += kThreads) {
    const int r = c / S::kChunks;
    const int col = (c % S::kChunks) * 8;
    const bool valid = r < w.group && col < p.head_dim;
    const T* src = qkv;
    if (valid) {
      const int64_t head = static_cast<int64_t>(w.kv_head) * w.group + r;
      src = qkv + static_cast<int64_t>(w.q_begin) * p.row_width + head * p.head_dim + col;
    }
    cp_async_16(smem_addr(q_s + r * S::kStride + col), src, valid);
  }
  cp_async_commit();

  // This warp's tiles: tile_begin + warp + kWarps i, i < n_tiles.
  const int32_t* table = p.block_tables + static_cast<int64_t>(w.seq) * p.max_blocks_per_seq;
  const int first_tile = w.tile_begin + warp;
  const int n_tiles = first_tile < w.tile_end ? (w.tile_end - first_tile + kWarps - 1) / kWarps : 0;
  const int key_lane = lane & (kBlockN - 1);  // lanes 16..31 mirror 0..15
#pragma unroll
  for (int s = 0; s < kStages; ++s) {  // one commit group per stage, even when empty
    if (s < n_tiles) {
      const int key = (first_tile + s * kWarps) * kBlockN + key_lane;
      issue_kv_tile<T, KV, kD>(p, kv_row_offset(p, table, w.kv_head, key, w.kv_end), lane,
                               k_stage + s * S::kStageTileBytes, v_stage + s * S::kStageTileBytes);
    }
    cp_async_commit();
  }
  cp_async_wait<kStages>();  // this thread's Q chunks landed
  __syncthreads();           // everyone's did (the only CTA barrier before the merge)

  const T* q_row = q_s + (lane & 15) * S::kStride + (lane >> 4) * 8;
  [[maybe_unused]] uint32_t q_frag[S::kQInRegs ? kD / 16 : 1][4];
  load_q_frags<kD, S::kQInRegs>(q_row, q_frag);

  SoftmaxState st;
  float o_acc[kD / 8][4];
  init_row_state<kD>(w, lane, st, o_acc);
  const float2 scales = attention_detail::kv_scales<KV>(p);  // (k_scale, v_scale)
  const ScoreParams sp = ScoreParams::from(p, scales.x);
  // ldmatrix lane addresses within a stage (see compute_scores / accumulate_pv).
  const int k_lane_off = ((lane & 7) + ((lane >> 4) << 3)) * S::kStride + ((lane >> 3) & 1) * 8;
  const int v_lane_off = ((lane & 7) + ((lane >> 3) & 1) * 8) * S::kStride + (lane >> 4) * 8;

  for (int i = 0; i < n_tiles; ++i) {
    const int stage = i % kStages;
    const bool refill = i + kStages < n_tiles;  // warp-uniform
    // The refill's block-table read goes out before this tile's math.
    const int64_t next_off =
        refill ? kv_row_offset(p, table, w.kv_head,
                               (first_tile + (i + kStages) * kWarps) * kBlockN + key_lane, w.kv_end)
               : -1;
    cp_async_wait<kStages - 1>();  // tile i (this thread's chunks) landed
    unsigned char* k_in = k_stage + stage * S::kStageTileBytes;
    unsigned char* v_in = v_stage + stage * S::kStageTileBytes;
    const T* k_s = reinterpret_cast<const T*>(k_in);
    const T* v_s = reinterpret_cast<const T*>(v_in);
    if constexpr (S::kFp8) {
      // This lane's chunks to 16 bits (the previous tile's math is done:
      // __syncwarp at the end of the loop), then the stage is free to refill.
      convert_kv_tile<T, KV, kD>(k_in, v_in, lane, k_conv, v_conv);
      if (refill) issue_kv_tile<T, KV, kD>(p, next_off, lane, k_in, v_in);
      cp_async_commit();
      k_s = k_conv;
      v_s = v_conv;
    }
    __syncwarp();  // every lane's chunks landed (converted)

    // S = Q K^T (16 rows x 16 keys).
    float s_acc[kBlockN / 8][4];
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s_acc[nt][e] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t b[4];
      ldmatrix_x4(b, smem_addr(k_s + k_lane_off + kk * 16));
      if constexpr (S::kQInRegs) {
        mma_16816<T>(s_acc[0], q_frag[kk], b[0], b[1]);
        mma_16816<T>(s_acc[1], q_frag[kk], b[2], b[3]);
      } else {
        uint32_t a[4];
        ldmatrix_x4(a, smem_addr(q_row + kk * 16));
        mma_16816<T>(s_acc[0], a, b[0], b[1]);
        mma_16816<T>(s_acc[1], a, b[2], b[3]);
      }
    }
    const int n0 = (first_tile + i * kWarps) * kBlockN;
    online_softmax<kBlockN, kD>(s_acc, o_acc, st, n0, w.kv_end, lane, sp);

    // O += P V.
    uint32_t a[4];
    pack_p<T>(s_acc, a);
#pragma unroll
    for (int dn = 0; dn < kD / 16; ++dn) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, smem_addr(v_s + v_lane_off + dn * 16));
      mma_16816<T>(o_acc[2 * dn], a, b[0], b[1]);
      mma_16816<T>(o_acc[2 * dn + 1], a, b[2], b[3]);
    }
    __syncwarp();  // every lane is done with this stage (FP8: the converted tiles)
    if constexpr (!S::kFp8) {
      if (refill) issue_kv_tile<T, KV, kD>(p, next_off, lane, k_in, v_in);
      cp_async_commit();
    }
  }
  cp_async_wait<0>();
  __syncwarp();

  // Merge the four warps' states: warp w writes its rows' O and (m, l) into
  // its own region, then every thread combines some (row, dim pair).
  float* o_m = reinterpret_cast<float*>(region);  // [16, kStride] f32
  float* ml_m = o_m + kRows * S::kStride;         // [16][2]
  float row_sum[2];
  attention_detail::quad_row_sums(st, row_sum);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = (lane >> 2) + 8 * h;
    if (r >= w.group) continue;
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      const int d = dt * 8 + 2 * (lane & 3);
      *reinterpret_cast<float2*>(o_m + r * S::kStride + d) =
          make_float2(o_acc[dt][2 * h], o_acc[dt][2 * h + 1]);
    }
    if ((lane & 3) == 0) *reinterpret_cast<float2*>(ml_m + 2 * r) = make_float2(st.m[h], row_sum[h]);
  }
  __syncthreads();

  merge_warp_states<T, kD>(p, w, reinterpret_cast<const float*>(smem_raw + S::kQBytes),
                           S::kWarpRegionBytes / sizeof(float), scales.y);
}

}  // namespace attention_decode_detail

template <typename T, typename KV, int kHeadDim>
cudaError_t configure_attention_decode() {
  using S = attention_decode_detail::DecodeShape<T, KV, kHeadDim>;
  return cudaFuncSetAttribute(attention_decode_detail::attention_decode_kernel<T, KV, kHeadDim>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(S::kSmemBytes));
}

template <typename T, typename KV, int kHeadDim>
cudaError_t launch_attention_decode(const AttentionParams& p, cudaStream_t stream) {
  using S = attention_decode_detail::DecodeShape<T, KV, kHeadDim>;
  // x: kv head fastest, so the CTAs reading one sequence's blocks start together.
  const dim3 grid(static_cast<unsigned>(p.num_kv_heads * p.num_splits), 1u,
                  static_cast<unsigned>(p.num_seqs));
  return launch_kernel(attention_decode_detail::attention_decode_kernel<T, KV, kHeadDim>, grid,
                       attention_decode_detail::kThreads, S::kSmemBytes, stream, p);
}

}  // namespace pagoda::cuda
