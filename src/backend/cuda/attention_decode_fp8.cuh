// The decode attention kernel over an FP8 cache that converts in registers
// (see attention.h for when it runs). Included only by the attention_fp8_d*.cu
// instantiation files.
//
// Same work split, online softmax, merge and outputs as the decode kernel
// (attention_decode.cuh): a CTA = (kv head, split, sequence), its G rows in
// one m16 tile, warp w taking the 16-key tiles w, w + 4, ... through its own
// cp.async pipeline. What differs is how the 8-bit K/V tiles reach the
// tensor cores. The staged path (attention_decode.cuh with KV = fp8_e4m3)
// copies 8-byte chunks, converts every landed tile into 16-bit K and V tiles
// in shared memory and reads those back with ldmatrix. Here:
//   - K and V tiles are copied in 16-byte chunks (16 keys' bytes: half the
//     copy instructions of the staged path; needs head_dim % 16 == 0),
//   - each lane loads the bytes of its mma B fragments straight from the
//     8-bit tiles with 32-bit shared loads and converts them in registers
//     (e4m3x2_lo_to / e4m3x2_hi_to: integer ops and one multiply, exact),
//     so there is no 16-bit staging tile, no store and no re-read,
//   - the freed shared memory holds more stages (kStages 3 or 4 of 16 keys).
//
// Fragment layouts (thread (g, c) = (lane / 4, lane % 4); mma m16n8k16):
//   S = Q K^T: a 32-bit load u = K[key g (+ 8)][16 kk + 4c, +4) bytes gives
//     b0 = bytes (0, 2) and b1 = bytes (1, 3); so within each 16-dim step the
//     mma's k index l stands for dim 2l (l < 8) or 2(l - 8) + 1, and Q is
//     stored in q_s with the same permutation (even dims, then odd dims, per
//     step): the dot product is unchanged.
//   O += P V: the keys (mma k) are not permuted, the output dims are: lane
//     (g, c) loads V[key][32T + 4g, +4) for its keys 2c, 2c + 1, 2c + 8,
//     2c + 9 and byte-permutes them into the B fragments of the four n8 tiles
//     4T + j (j < 4), whose column n stands for dim 32T + 4n + j. So the
//     accumulator o_acc[4T + j][e (+2)] of lane (g, c) is O[row g (+8)]
//     [32T + 8c + 4e + j]: eight consecutive dims per 32-dim block.
//
// Shared memory (tile rows of kD + 16 bytes, which keeps both kinds of
// 32-bit loads free of bank conflicts: eight K rows per load at offsets
// distinct mod 128 in 16-byte steps, four V rows at distinct 32-byte steps):
//   q_s                    [16, kD + 8] T   the group's query rows, permuted
//   warp w region          [kStages][K, V][16, kD + 16] bytes
//     reused at the end as [16, kD + 8] f32 O and [16][2] f32 (m, l)
// kStages: the most of 4, 3, 2 at which as many CTAs fit per SM (by shared
// memory) as for the 16-bit decode kernel of this head dim:
//   kD  32: 4 stages, 25,856 B    64: 4, 43,264    96: 3, 46,336
//   kD 128: 3,        59,648     192: 4, 112,896   256: 4, 147,712
// so at kD 128 a warp has 48 keys in flight (the staged path: 32).
//
// Contracts: those of the decode kernel; in addition p.head_dim % 16 == 0 and
// 16-byte aligned caches (the launcher takes the staged path otherwise).
#pragma once

#include "backend/cuda/attention_decode.cuh"

namespace pagoda::cuda {
namespace attention_decode_fp8_detail {

using attention_decode_detail::decode_work;
using attention_decode_detail::DecodeShape;
using attention_decode_detail::DecodeWork;
using attention_decode_detail::kBlockN;
using attention_decode_detail::kRows;
using attention_decode_detail::kThreads;
using attention_decode_detail::kWarps;
using attention_decode_detail::init_row_state;
using attention_decode_detail::kv_row_offset;
using attention_decode_detail::load_q_frags;
using attention_decode_detail::pack_p;
using attention_detail::online_softmax;
using attention_detail::ScoreParams;
using attention_detail::SoftmaxState;

template <typename T, int kD>
struct Fp8DecodeShape {
  static_assert(kD % 32 == 0 && kD <= 256);
  static constexpr int kStride = kD + 8;         // q_s and merge row stride, elements
  static constexpr int kRowBytes = kD + 16;      // 8-bit tile row stride, bytes
  static constexpr int kChunks = kD / 16;        // 16-byte chunks per key row
  static constexpr int kChunksPerLane = kBlockN * kChunks / 32;  // of one K (or V) tile
  static_assert(kBlockN * kChunks % 32 == 0);
  static constexpr bool kQInRegs = kD <= 192;    // as in the decode kernel
  static constexpr size_t kTileBytes = static_cast<size_t>(kBlockN) * kRowBytes;
  static constexpr size_t kQBytes = static_cast<size_t>(kRows) * kStride * sizeof(T);
  static constexpr size_t smem_bytes(int stages) { return kQBytes + kWarps * stages * 2 * kTileBytes; }
  static constexpr int fit(size_t bytes) {
    const int n = static_cast<int>(size_t{228 * 1024} / (bytes + 1024));
    return n >= 4 ? 4 : (n < 1 ? 1 : n);
  }
  // The CTAs per SM of the 16-bit decode kernel (capped at 4, like ours).
  static constexpr int kTargetFit = DecodeShape<T, T, kD>::kMinBlocksPerSm;
  static constexpr int kStages = fit(smem_bytes(4)) >= kTargetFit   ? 4
                                 : fit(smem_bytes(3)) >= kTargetFit ? 3
                                                                    : 2;
  static constexpr size_t kWarpRegionBytes = kStages * 2 * kTileBytes;
  static constexpr size_t kSmemBytes = smem_bytes(kStages);
  static constexpr int kMinBlocksPerSm = fit(kSmemBytes);
  static_assert(static_cast<size_t>(kRows) * kStride * sizeof(float) + kRows * 2 * sizeof(float) <=
                kWarpRegionBytes);
};

// Issues cp.async for one K tile and one V tile (16 keys) into [16, kRowBytes]
// byte tiles: lane r < 16 holds the element offset of key r's row (-1: zero
// row); lane l copies 16-byte chunks l + 32 i (consecutive lanes, consecutive
// chunks of a row).
template <typename T, int kD>
__device__ __forceinline__ void issue_kv_tile(const AttentionParams& p, int64_t row_off, int lane,
                                              unsigned char* k_dst, unsigned char* v_dst) {
  using S = Fp8DecodeShape<T, kD>;
  const auto* k_base = static_cast<const unsigned char*>(p.k_cache);
  const auto* v_base = static_cast<const unsigned char*>(p.v_cache);
#pragma unroll
  for (int i = 0; i < S::kChunksPerLane; ++i) {
    const int c = lane + 32 * i;
    const int r = c / S::kChunks;
    const int col = (c % S::kChunks) * 16;
    const long long off = __shfl_sync(0xffffffffu, static_cast<long long>(row_off), r);
    const bool valid = off >= 0 && col < p.head_dim;
    const int64_t src = valid ? off + col : 0;
    cp_async_16(smem_addr(k_dst + r * S::kRowBytes + col), k_base + src, valid);
    cp_async_16(smem_addr(v_dst + r * S::kRowBytes + col), v_base + src, valid);
  }
}

// Loads the G query rows into q_s [16, kStride] T, zero past G and head_dim,
// each 16-dim step permuted to (even dims, odd dims) (see the header).
template <typename T, int kD>
__device__ __forceinline__ void load_q_permuted(const AttentionParams& p, const DecodeWork& w,
                                                T* q_s) {
  using S = Fp8DecodeShape<T, kD>;
  const T* qkv = static_cast<const T*>(p.qkv);
  for (int c = threadIdx.x; c < kRows * (kD / 16); c += kThreads) {
    const int r = c / (kD / 16);
    const int col = (c % (kD / 16)) * 16;
    uint4 x[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
    if (r < w.group && col < p.head_dim) {
      const int64_t head = static_cast<int64_t>(w.kv_head) * w.group + r;
      const uint4* src = reinterpret_cast<const uint4*>(
          qkv + static_cast<int64_t>(w.q_begin) * p.row_width + head * p.head_dim + col);
      x[0] = src[0];
      x[1] = src[1];
    }
    // Words hold dim pairs (2i, 2i + 1); evens first, then odds.
    const uint32_t v[8] = {x[0].x, x[0].y, x[0].z, x[0].w, x[1].x, x[1].y, x[1].z, x[1].w};
    uint4 even, odd;
    even.x = __byte_perm(v[0], v[1], 0x5410);
    even.y = __byte_perm(v[2], v[3], 0x5410);
    even.z = __byte_perm(v[4], v[5], 0x5410);
    even.w = __byte_perm(v[6], v[7], 0x5410);
    odd.x = __byte_perm(v[0], v[1], 0x7632);
    odd.y = __byte_perm(v[2], v[3], 0x7632);
    odd.z = __byte_perm(v[4], v[5], 0x7632);
    odd.w = __byte_perm(v[6], v[7], 0x7632);
    uint4* dst = reinterpret_cast<uint4*>(q_s + r * S::kStride + col);
    dst[0] = even;
    dst[1] = odd;
  }
}

// s_acc = Q K^T for one 16-key tile k8 [16, kRowBytes] bytes.
template <typename T, int kD>
__device__ __forceinline__ void tile_scores(const unsigned char* k8, const T* q_row,
                                            const uint32_t (*q_frag)[4], int lane,
                                            float (&s_acc)[kBlockN / 8][4]) {
  using S = Fp8DecodeShape<T, kD>;
#pragma unroll
  for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s_acc[nt][e] = 0.0f;
  }
  const unsigned char* k_lane = k8 + (lane >> 2) * S::kRowBytes + 4 * (lane & 3);
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint32_t u0 = *reinterpret_cast<const uint32_t*>(k_lane + kk * 16);
    const uint32_t u1 = *reinterpret_cast<const uint32_t*>(k_lane + 8 * S::kRowBytes + kk * 16);
    uint32_t a[4];
    if constexpr (S::kQInRegs) {
#pragma unroll
      for (int e = 0; e < 4; ++e) a[e] = q_frag[kk][e];
    } else {
      ldmatrix_x4(a, smem_addr(q_row + kk * 16));
    }
    mma_16816<T>(s_acc[0], a, e4m3x2_lo_to<T>(u0), e4m3x2_hi_to<T>(u0));
    mma_16816<T>(s_acc[1], a, e4m3x2_lo_to<T>(u1), e4m3x2_hi_to<T>(u1));
  }
}

// o_acc += P V for one 16-key tile v8 [16, kRowBytes] bytes; a: P's A
// fragment. o_acc's dims are permuted (see the header).
template <typename T, int kD>
__device__ __forceinline__ void tile_pv(const unsigned char* v8, const uint32_t (&a)[4], int lane,
                                        float (&o_acc)[kD / 8][4]) {
  using S = Fp8DecodeShape<T, kD>;
  const unsigned char* v_lane = v8 + 2 * (lane & 3) * S::kRowBytes + 4 * (lane >> 2);
#pragma unroll
  for (int t32 = 0; t32 < kD / 32; ++t32) {
    const unsigned char* src = v_lane + 32 * t32;
    const uint32_t w0 = *reinterpret_cast<const uint32_t*>(src);                      // key 2c
    const uint32_t w1 = *reinterpret_cast<const uint32_t*>(src + S::kRowBytes);       // 2c + 1
    const uint32_t w8 = *reinterpret_cast<const uint32_t*>(src + 8 * S::kRowBytes);   // 2c + 8
    const uint32_t w9 = *reinterpret_cast<const uint32_t*>(src + 9 * S::kRowBytes);   // 2c + 9
    // Bytes (key a dim j, key a dim j + 1, key b dim j, key b dim j + 1).
    const uint32_t x01 = __byte_perm(w0, w1, 0x5410), x23 = __byte_perm(w0, w1, 0x7632);
    const uint32_t y01 = __byte_perm(w8, w9, 0x5410), y23 = __byte_perm(w8, w9, 0x7632);
    mma_16816<T>(o_acc[4 * t32], a, e4m3x2_lo_to<T>(x01), e4m3x2_lo_to<T>(y01));
    mma_16816<T>(o_acc[4 * t32 + 1], a, e4m3x2_hi_to<T>(x01), e4m3x2_hi_to<T>(y01));
    mma_16816<T>(o_acc[4 * t32 + 2], a, e4m3x2_lo_to<T>(x23), e4m3x2_lo_to<T>(y23));
    mma_16816<T>(o_acc[4 * t32 + 3], a, e4m3x2_hi_to<T>(x23), e4m3x2_hi_to<T>(y23));
  }
}

template <typename T, int kD>
__global__ void __launch_bounds__(kThreads, (Fp8DecodeShape<T, kD>::kMinBlocksPerSm))
    attention_decode_fp8_kernel(AttentionParams p) {
  pdl_enter();
  using S = Fp8DecodeShape<T, kD>;
  constexpr int kStages = S::kStages;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);

  DecodeWork w;
  if (!decode_work(p, w)) return;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  unsigned char* region = smem_raw + S::kQBytes + warp * S::kWarpRegionBytes;
  unsigned char* k_stage = region;  // [kStages] K tiles, then [kStages] V tiles
  unsigned char* v_stage = k_stage + kStages * S::kTileBytes;

  // This warp's tiles: tile_begin + warp + kWarps i, i < n_tiles. The K/V
  // copies go out first; Q's global loads overlap them.
  const int32_t* table = p.block_tables + static_cast<int64_t>(w.seq) * p.max_blocks_per_seq;
  const int first_tile = w.tile_begin + warp;
  const int n_tiles = first_tile < w.tile_end ? (w.tile_end - first_tile + kWarps - 1) / kWarps : 0;
  const int key_lane = lane & (kBlockN - 1);  // lanes 16..31 mirror 0..15
#pragma unroll
  for (int s = 0; s < kStages; ++s) {  // one commit group per stage, even when empty
    if (s < n_tiles) {
      const int key = (first_tile + s * kWarps) * kBlockN + key_lane;
      issue_kv_tile<T, kD>(p, kv_row_offset(p, table, w.kv_head, key, w.kv_end), lane,
                           k_stage + s * S::kTileBytes, v_stage + s * S::kTileBytes);
    }
    cp_async_commit();
  }
  load_q_permuted<T, kD>(p, w, q_s);
  __syncthreads();  // q_s written (the only CTA barrier before the merge)

  const T* q_row = q_s + (lane & 15) * S::kStride + (lane >> 4) * 8;
  uint32_t q_frag[S::kQInRegs ? kD / 16 : 1][4];
  load_q_frags<kD, S::kQInRegs>(q_row, q_frag);

  SoftmaxState st;
  float o_acc[kD / 8][4];
  init_row_state<kD>(w, lane, st, o_acc);
  const float2 scales = attention_detail::kv_scales<fp8_e4m3>(p);  // (k_scale, v_scale)
  const ScoreParams sp = ScoreParams::from(p, scales.x);

  for (int i = 0; i < n_tiles; ++i) {
    const int stage = i % kStages;
    const bool refill = i + kStages < n_tiles;  // warp-uniform
    // The refill's block-table read goes out before this tile's math.
    const int64_t next_off =
        refill ? kv_row_offset(p, table, w.kv_head,
                               (first_tile + (i + kStages) * kWarps) * kBlockN + key_lane, w.kv_end)
               : -1;
    cp_async_wait<kStages - 1>();  // tile i (this thread's chunks) landed
    __syncwarp();                  // every lane's did
    unsigned char* k8 = k_stage + stage * S::kTileBytes;
    unsigned char* v8 = v_stage + stage * S::kTileBytes;

    float s_acc[kBlockN / 8][4];
    tile_scores<T, kD>(k8, q_row, q_frag, lane, s_acc);
    const int n0 = (first_tile + i * kWarps) * kBlockN;
    online_softmax<kBlockN, kD>(s_acc, o_acc, st, n0, w.kv_end, lane, sp);

    // O += P V.
    uint32_t a[4];
    pack_p<T>(s_acc, a);
    tile_pv<T, kD>(v8, a, lane, o_acc);
    __syncwarp();  // every lane is done with this stage
    if (refill) issue_kv_tile<T, kD>(p, next_off, lane, k8, v8);
    cp_async_commit();
  }
  cp_async_wait<0>();
  __syncwarp();

  // Warp w writes its rows' O (dims un-permuted: lane (g, c) holds dims
  // 32 T + 8c + [0, 8) of rows g, g + 8) and (m, l) into its region.
  float* o_m = reinterpret_cast<float*>(region);  // [16, kStride] f32
  float* ml_m = o_m + kRows * S::kStride;         // [16][2]
  float row_sum[2];
  attention_detail::quad_row_sums(st, row_sum);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = (lane >> 2) + 8 * h;
    if (r >= w.group) continue;
#pragma unroll
    for (int t32 = 0; t32 < kD / 32; ++t32) {
      float4* dst = reinterpret_cast<float4*>(o_m + r * S::kStride + 32 * t32 + 8 * (lane & 3));
      dst[0] = make_float4(o_acc[4 * t32][2 * h], o_acc[4 * t32 + 1][2 * h],
                           o_acc[4 * t32 + 2][2 * h], o_acc[4 * t32 + 3][2 * h]);
      dst[1] = make_float4(o_acc[4 * t32][2 * h + 1], o_acc[4 * t32 + 1][2 * h + 1],
                           o_acc[4 * t32 + 2][2 * h + 1], o_acc[4 * t32 + 3][2 * h + 1]);
    }
    if ((lane & 3) == 0) *reinterpret_cast<float2*>(ml_m + 2 * r) = make_float2(st.m[h], row_sum[h]);
  }
  __syncthreads();
  attention_decode_detail::merge_warp_states<T, kD>(
      p, w, reinterpret_cast<const float*>(smem_raw + S::kQBytes),
      S::kWarpRegionBytes / sizeof(float), scales.y);
}

}  // namespace attention_decode_fp8_detail

template <typename T, int kHeadDim>
cudaError_t configure_attention_decode_fp8() {
  using S = attention_decode_fp8_detail::Fp8DecodeShape<T, kHeadDim>;
  return cudaFuncSetAttribute(attention_decode_fp8_detail::attention_decode_fp8_kernel<T, kHeadDim>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(S::kSmemBytes));
}

template <typename T, int kHeadDim>
cudaError_t launch_attention_decode_fp8(const AttentionParams& p, cudaStream_t stream) {
  using S = attention_decode_fp8_detail::Fp8DecodeShape<T, kHeadDim>;
  const dim3 grid(static_cast<unsigned>(p.num_kv_heads * p.num_splits), 1u,
                  static_cast<unsigned>(p.num_seqs));
  return launch_kernel(attention_decode_fp8_detail::attention_decode_fp8_kernel<T, kHeadDim>, grid,
                       attention_decode_fp8_detail::kThreads, S::kSmemBytes, stream, p);
}

}  // namespace pagoda::cuda
