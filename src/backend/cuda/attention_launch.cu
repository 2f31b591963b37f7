// Paged attention launcher: validation, split-KV plan, kernel and head-dim
// dispatch (decode, prefill or tile kernel) and the split combine kernel.
#include <algorithm>

#include "backend/cuda/attention.h"
#include "backend/cuda/attention_tiles.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_convert.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/mma_helpers.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kMaxSplits = 32;          // one lane per split in the combine kernel
// Tile and prefill kernels (64-key tiles both): one tile per split at least.
// A tile-kernel CTA's time is then mostly the latency of its first K/V tile,
// so for a short batch many one-tile splits beat a few long ones (batch 1,
// 1024 keys: 16 splits).
constexpr int kMinKeysPerSplit = 64;
// Decode kernel: one 16-key tile per warp per split at least (its four warps
// issue their first tiles together, so such a split also costs about one
// tile latency).
constexpr int kDecodeMinKeysPerSplit = kAttentionDecodeWarps * kAttentionDecodeBlockN;
constexpr int kCombineThreads = 32;      // one warp per (token, q head)
constexpr int kCombineBatch = 8;         // split partials loaded before any is used

// One warp per (token, q head) item: merges the num_splits partials
// O_i (unnormalised), m_i (log2 units), l_i into out = sum_i w_i O_i / sum_i w_i l_i,
// w_i = 2^(m_i - max m). Lane i computes w_i / sum; lanes then own 4
// consecutive dims (head_dim <= 256: two passes at most) and loads the
// partials of kCombineBatch splits before accumulating them, so the loads
// overlap instead of paying one L2 latency per split. Rows outside
// [qsl[0], qsl[S]) belong to no sequence and are left untouched, like the
// unsplit path.
template <typename T>
__global__ void __launch_bounds__(kCombineThreads) attention_combine_kernel(AttentionParams p) {
  pdl_enter();
  const int lane = threadIdx.x;
  const int64_t item = blockIdx.x;
  const int64_t t = item / p.num_q_heads;
  if (t < p.query_start_loc[0] || t >= p.query_start_loc[p.num_seqs]) return;
  const float2* ml = reinterpret_cast<const float2*>(p.partial_ml) + item * p.num_splits;
  const float2 mine = lane < p.num_splits ? ml[lane] : make_float2(-INFINITY, 0.0f);
  const float m_max = warp_max(mine.x);
  const float weight = lane < p.num_splits && m_max != -INFINITY ? exp2f(mine.x - m_max) : 0.0f;
  const float total = warp_sum(weight * mine.y);
  // Normalised weights through shared memory: the dim loop below runs on
  // fewer than 32 lanes when head_dim < 128, so it cannot shuffle.
  __shared__ float w_s[kMaxSplits];
  if (lane < p.num_splits) w_s[lane] = total > 0.0f ? weight / total : 0.0f;  // 0: no key at all
  __syncwarp();
  const float* partial = p.partial_out + item * p.num_splits * p.head_dim;
  T* out = static_cast<T*>(p.out) + item * p.head_dim;
  for (int d = 4 * lane; d < p.head_dim; d += 4 * kCombineThreads) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int i0 = 0; i0 < p.num_splits; i0 += kCombineBatch) {
      float4 v[kCombineBatch];
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        v[j] = i0 + j < p.num_splits
                   ? *reinterpret_cast<const float4*>(partial + static_cast<int64_t>(i0 + j) * p.head_dim + d)
                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        const float w = i0 + j < p.num_splits ? w_s[i0 + j] : 0.0f;
        acc.x += w * v[j].x;
        acc.y += w * v[j].y;
        acc.z += w * v[j].z;
        acc.w += w * v[j].w;
      }
    }
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + d);
    dst[0] = pack2<T>(acc.x, acc.y);
    dst[1] = pack2<T>(acc.z, acc.w);
  }
}

bool valid_shape(const AttentionParams& p) {
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return false;
  const bool fp8 = p.kv_dtype == DType::kF8E4M3;
  if (!fp8 && p.kv_dtype != p.dtype) return false;
  if (fp8 && p.kv_scales == nullptr) return false;
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0) return false;
  if (p.num_kv_heads <= 0 || p.num_q_heads <= 0 || p.num_q_heads % p.num_kv_heads != 0) return false;
  if (p.block_size <= 0 || p.max_blocks_per_seq < 0 || p.num_seqs > 65535) return false;
  if (p.row_width != static_cast<int64_t>(p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim) return false;
  const uintptr_t cache_align = fp8 ? 8 : 16;  // one chunk of 8 elements
  return is_aligned(p.qkv, 16) && is_aligned(p.k_cache, cache_align) &&
         is_aligned(p.v_cache, cache_align) && is_aligned(p.out, 4);
}

template <typename T, typename KV>
cudaError_t launch_for_head_dim(const AttentionParams& p, cudaStream_t stream) {
  if (p.head_dim <= 32) return launch_attention_tiles<T, KV, 32>(p, stream);
  if (p.head_dim <= 64) return launch_attention_tiles<T, KV, 64>(p, stream);
  if (p.head_dim <= 96) return launch_attention_tiles<T, KV, 96>(p, stream);
  if (p.head_dim <= 128) return launch_attention_tiles<T, KV, 128>(p, stream);
  if (p.head_dim <= 192) return launch_attention_tiles<T, KV, 192>(p, stream);
  return launch_attention_tiles<T, KV, 256>(p, stream);
}

// The register-converting FP8 decode kernel (p.head_dim % 16 == 0).
template <typename T>
cudaError_t launch_decode_fp8_for_head_dim(const AttentionParams& p, cudaStream_t stream) {
  if (p.head_dim <= 32) return launch_attention_decode_fp8<T, 32>(p, stream);
  if (p.head_dim <= 64) return launch_attention_decode_fp8<T, 64>(p, stream);
  if (p.head_dim <= 96) return launch_attention_decode_fp8<T, 96>(p, stream);
  if (p.head_dim <= 128) return launch_attention_decode_fp8<T, 128>(p, stream);
  if (p.head_dim <= 192) return launch_attention_decode_fp8<T, 192>(p, stream);
  return launch_attention_decode_fp8<T, 256>(p, stream);
}

// Whether an FP8-cache decode launch takes the register-converting kernel
// (attention.h: AttentionParams::fp8_decode_staged).
bool uses_fp8_register_decode(const AttentionParams& p) {
  return !p.fp8_decode_staged && p.head_dim % 16 == 0 && is_aligned(p.k_cache, 16) &&
         is_aligned(p.v_cache, 16);
}

template <typename T, typename KV>
cudaError_t launch_decode_for_head_dim(const AttentionParams& p, cudaStream_t stream) {
  if constexpr (kIsFp8<KV>) {
    if (uses_fp8_register_decode(p)) return launch_decode_fp8_for_head_dim<T>(p, stream);
  }
  if (p.head_dim <= 32) return launch_attention_decode<T, KV, 32>(p, stream);
  if (p.head_dim <= 64) return launch_attention_decode<T, KV, 64>(p, stream);
  if (p.head_dim <= 96) return launch_attention_decode<T, KV, 96>(p, stream);
  if (p.head_dim <= 128) return launch_attention_decode<T, KV, 128>(p, stream);
  if (p.head_dim <= 192) return launch_attention_decode<T, KV, 192>(p, stream);
  return launch_attention_decode<T, KV, 256>(p, stream);
}

template <typename T, typename KV>
cudaError_t launch_prefill_for_head_dim(const AttentionParams& p, cudaStream_t stream) {
  if (p.head_dim <= 32) return launch_attention_prefill<T, KV, 32>(p, stream);
  if (p.head_dim <= 64) return launch_attention_prefill<T, KV, 64>(p, stream);
  if (p.head_dim <= 96) return launch_attention_prefill<T, KV, 96>(p, stream);
  return launch_attention_prefill<T, KV, 128>(p, stream);
}

// The kernel the host hints pick for p (attention.h), at p's head dim.
template <typename T, typename KV>
cudaError_t launch_for_kernel(const AttentionParams& p, cudaStream_t stream) {
  if (attention_uses_decode_kernel(p)) return launch_decode_for_head_dim<T, KV>(p, stream);
  if (attention_uses_prefill_kernel(p)) return launch_prefill_for_head_dim<T, KV>(p, stream);
  return launch_for_head_dim<T, KV>(p, stream);
}

template <typename T, typename KV>
cudaError_t configure_all() {
  const cudaError_t errors[] = {
      configure_attention_tiles<T, KV, 32>(),   configure_attention_tiles<T, KV, 64>(),
      configure_attention_tiles<T, KV, 96>(),   configure_attention_tiles<T, KV, 128>(),
      configure_attention_tiles<T, KV, 192>(),  configure_attention_tiles<T, KV, 256>(),
      configure_attention_decode<T, KV, 32>(),  configure_attention_decode<T, KV, 64>(),
      configure_attention_decode<T, KV, 96>(),  configure_attention_decode<T, KV, 128>(),
      configure_attention_decode<T, KV, 192>(), configure_attention_decode<T, KV, 256>(),
      configure_attention_prefill<T, KV, 32>(), configure_attention_prefill<T, KV, 64>(),
      configure_attention_prefill<T, KV, 96>(), configure_attention_prefill<T, KV, 128>()};
  for (cudaError_t e : errors) {
    if (e != cudaSuccess) return e;
  }
  if constexpr (kIsFp8<KV>) {
    const cudaError_t fp8_errors[] = {
        configure_attention_decode_fp8<T, 32>(),  configure_attention_decode_fp8<T, 64>(),
        configure_attention_decode_fp8<T, 96>(),  configure_attention_decode_fp8<T, 128>(),
        configure_attention_decode_fp8<T, 192>(), configure_attention_decode_fp8<T, 256>()};
    for (cudaError_t e : fp8_errors) {
      if (e != cudaSuccess) return e;
    }
  }
  return cudaSuccess;
}

}  // namespace

bool attention_uses_decode_kernel(const AttentionParams& p) {
  return p.max_query_len == 1 && p.num_kv_heads > 0 &&
         p.num_q_heads / p.num_kv_heads <= kAttentionDecodeMaxGroup;
}

bool attention_uses_prefill_kernel(const AttentionParams& p) {
  if (p.max_query_len <= 1 || p.num_kv_heads <= 0 || p.head_dim > 128) return false;
  const int64_t m_tiles = attention_prefill_m_tiles(p);
  return m_tiles > 0 && m_tiles <= 65535 &&
         p.num_blocks * static_cast<int64_t>(p.block_size) <= 0x7fffffff;
}

// Splits so that the grid has >= 2 CTAs per SM (a decode-kernel CTA keeps
// up to 8 K/V tiles in flight, a tile-kernel CTA one, but both kernels need
// the CTAs spread over every SM for a short batch), no more than leave each
// split its minimum keys at the longest context (or window), capped by the workspace and
// the combine kernel's 32 lanes.
int plan_attention_splits(const AttentionParams& p, const AttentionWorkspace& ws) {
  if (p.num_kv_heads <= 0) return 1;
  const bool decode = attention_uses_decode_kernel(p);
  const int64_t group = p.num_q_heads / p.num_kv_heads;
  // CTAs per split: the decode kernel has one per (kv head, sequence), the
  // prefill and tile kernels one per (row tile, kv head, sequence), with
  // tiles of kAttentionPrefillBlockM and kAttentionBlockM rows.
  const int64_t m_tiles =
      decode ? 1
      : attention_uses_prefill_kernel(p)
          ? attention_prefill_m_tiles(p)
          : ceil_div(static_cast<int64_t>(p.max_query_len) * group, kAttentionBlockM);
  const int64_t ctas = m_tiles * p.num_kv_heads * p.num_seqs;
  const int64_t target = 2 * static_cast<int64_t>(ws.num_sms);
  if (ctas <= 0 || ctas >= target) return 1;
  int64_t splits = ceil_div(target, ctas);
  // A sliding window bounds the keys a row reads (the kernels skip the rest).
  const int64_t max_keys =
      p.window > 0 ? std::min<int64_t>(p.max_seq_len, int64_t{p.window} + p.max_query_len - 1)
                   : p.max_seq_len;
  splits = std::min<int64_t>(
      splits, ceil_div(max_keys, decode ? kDecodeMinKeysPerSplit : kMinKeysPerSplit));
  const int64_t bytes_per_split =
      p.num_tokens * p.num_q_heads * (p.head_dim + 2) * static_cast<int64_t>(sizeof(float));
  splits = std::min<int64_t>(splits, bytes_per_split > 0
                                         ? static_cast<int64_t>(ws.bytes) / bytes_per_split
                                         : 0);
  splits = std::min<int64_t>(splits, kMaxSplits);
  splits = std::min<int64_t>(splits, 65535 / p.num_kv_heads);
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

cudaError_t launch_paged_attention(const AttentionParams& params, const AttentionWorkspace& ws,
                                   cudaStream_t stream) {
  if (params.num_tokens == 0 || params.num_seqs == 0 || params.max_query_len <= 0) {
    return cudaSuccess;
  }
  if (!valid_shape(params)) return cudaErrorInvalidValue;
  const int nd = params.num_decode_seqs;
  if (nd > 0 && nd < params.num_seqs && params.max_query_len > 1) {
    // Decode rows [0, nd) (one per sequence, leading) through the decode
    // kernel, then the other sequences; the launches run in stream order,
    // so they may share the split workspace.
    AttentionParams d = params;
    d.num_seqs = nd;
    d.max_query_len = 1;
    d.num_tokens = nd;
    d.num_decode_seqs = 0;
    if (attention_uses_decode_kernel(d)) {
      AttentionParams rest = params;
      rest.query_start_loc += nd;
      rest.seq_lens += nd;
      rest.block_tables += static_cast<int64_t>(nd) * params.max_blocks_per_seq;
      rest.num_seqs -= nd;
      rest.num_decode_seqs = 0;
      const cudaError_t e = launch_paged_attention(d, ws, stream);
      return e != cudaSuccess ? e : launch_paged_attention(rest, ws, stream);
    }
  }
  AttentionParams p = params;
  p.num_splits = plan_attention_splits(p, ws);
  if (p.num_splits > 1) {
    p.partial_out = static_cast<float*>(ws.data);
    p.partial_ml = p.partial_out + p.num_tokens * p.num_q_heads * p.num_splits * p.head_dim;
  }
  const int64_t m_tiles = ceil_div(static_cast<int64_t>(p.max_query_len) *
                                       (p.num_q_heads / p.num_kv_heads),
                                   kAttentionBlockM);
  if (m_tiles > 0x7fffffff || static_cast<int64_t>(p.num_kv_heads) * p.num_splits > 65535) {
    return cudaErrorInvalidValue;
  }
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    cudaError_t e = p.kv_dtype == DType::kF8E4M3 ? launch_for_kernel<T, fp8_e4m3>(p, stream)
                                                 : launch_for_kernel<T, T>(p, stream);
    if (e != cudaSuccess || p.num_splits == 1) return e;
    const int64_t items = p.num_tokens * p.num_q_heads;
    if (items > 0x7fffffff) return cudaErrorInvalidValue;
    return launch_kernel(attention_combine_kernel<T>, static_cast<unsigned>(items), kCombineThreads,
                         0, stream, p);
  });
}

cudaError_t init_attention_kernels() {
  const cudaError_t errors[] = {configure_all<bf16, bf16>(), configure_all<f16, f16>(),
                                configure_all<bf16, fp8_e4m3>(), configure_all<f16, fp8_e4m3>()};
  for (cudaError_t e : errors) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace pagoda::cuda
