// Paged attention launcher: validation, split-KV plan, head-dim dispatch and
// the split combine kernel.
#include <algorithm>

#include "backend/cuda/attention.h"
#include "backend/cuda/attention_tiles.h"
#include "backend/cuda/cuda_common.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kMaxSplits = 32;          // one lane per split in the combine kernel
constexpr int kMinKeysPerSplit = 256;   // below this a split costs more than it saves
constexpr int kCombineWarps = 8;

// One warp per (token, q head): merges the num_splits partials
// O_i (unnormalised), m_i (log2 units), l_i into out = sum_i w_i O_i / sum_i w_i l_i,
// w_i = 2^(m_i - max m). Rows outside [qsl[0], qsl[S]) belong to no sequence
// and are left untouched, like the unsplit path.
template <typename T>
__global__ void attention_combine_kernel(AttentionParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kCombineWarps + (threadIdx.x >> 5);
  if (item >= p.num_tokens * p.num_q_heads) return;
  const int64_t t = item / p.num_q_heads;
  if (t < p.query_start_loc[0] || t >= p.query_start_loc[p.num_seqs]) return;
  const float2* ml = reinterpret_cast<const float2*>(p.partial_ml) + item * p.num_splits;
  const float2 mine = lane < p.num_splits ? ml[lane] : make_float2(-INFINITY, 0.0f);
  const float m_max = warp_max(mine.x);
  T* out = static_cast<T*>(p.out) + item * p.head_dim;
  if (m_max == -INFINITY) {
    for (int d = lane; d < p.head_dim; d += 32) out[d] = from_float<T>(0.0f);
    return;
  }
  const float weight = lane < p.num_splits ? exp2f(mine.x - m_max) : 0.0f;
  const float total = warp_sum(weight * mine.y);
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  const float* partial = p.partial_out + item * p.num_splits * p.head_dim;
  for (int d0 = 0; d0 < p.head_dim; d0 += 32) {
    const int d = d0 + lane;
    float acc = 0.0f;
    for (int i = 0; i < p.num_splits; ++i) {
      const float w = __shfl_sync(0xffffffffu, weight, i);
      if (d < p.head_dim) acc += w * partial[static_cast<int64_t>(i) * p.head_dim + d];
    }
    if (d < p.head_dim) out[d] = from_float<T>(acc * inv);
  }
}

bool valid_shape(const AttentionParams& p) {
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return false;
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0) return false;
  if (p.num_kv_heads <= 0 || p.num_q_heads <= 0 || p.num_q_heads % p.num_kv_heads != 0) return false;
  if (p.block_size <= 0 || p.max_blocks_per_seq < 0 || p.num_seqs > 65535) return false;
  if (p.row_width != static_cast<int64_t>(p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim) return false;
  return is_aligned(p.qkv, 16) && is_aligned(p.k_cache, 16) && is_aligned(p.v_cache, 16) &&
         is_aligned(p.out, 4);
}

template <typename T>
cudaError_t launch_for_head_dim(const AttentionParams& p, cudaStream_t stream) {
  if (p.head_dim <= 32) return launch_attention_tiles<T, 32>(p, stream);
  if (p.head_dim <= 64) return launch_attention_tiles<T, 64>(p, stream);
  if (p.head_dim <= 96) return launch_attention_tiles<T, 96>(p, stream);
  if (p.head_dim <= 128) return launch_attention_tiles<T, 128>(p, stream);
  if (p.head_dim <= 192) return launch_attention_tiles<T, 192>(p, stream);
  return launch_attention_tiles<T, 256>(p, stream);
}

template <typename T>
cudaError_t configure_all() {
  const cudaError_t errors[] = {
      configure_attention_tiles<T, 32>(),  configure_attention_tiles<T, 64>(),
      configure_attention_tiles<T, 96>(),  configure_attention_tiles<T, 128>(),
      configure_attention_tiles<T, 192>(), configure_attention_tiles<T, 256>()};
  for (cudaError_t e : errors) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

int plan_attention_splits(const AttentionParams& p, const AttentionWorkspace& ws) {
  const int64_t group = p.num_q_heads / p.num_kv_heads;
  const int64_t m_tiles = ceil_div(static_cast<int64_t>(p.max_query_len) * group, kAttentionBlockM);
  const int64_t ctas = m_tiles * p.num_kv_heads * p.num_seqs;
  const int64_t target = 2 * static_cast<int64_t>(ws.num_sms);
  if (ctas <= 0 || ctas >= target) return 1;
  int64_t splits = ceil_div(target, ctas);
  splits = std::min<int64_t>(splits, ceil_div(p.max_seq_len, kMinKeysPerSplit));
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
    cudaError_t e = launch_for_head_dim<T>(p, stream);
    if (e != cudaSuccess || p.num_splits == 1) return e;
    const int64_t items = p.num_tokens * p.num_q_heads;
    const int64_t blocks = ceil_div(items, kCombineWarps);
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    attention_combine_kernel<T>
        <<<static_cast<unsigned>(blocks), kCombineWarps * 32, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t init_attention_kernels() {
  const cudaError_t e = configure_all<bf16>();
  return e != cudaSuccess ? e : configure_all<f16>();
}

}  // namespace pagoda::cuda
