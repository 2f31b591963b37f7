#include "backend/cuda/rope_kv_kernels.h"

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_convert.cuh"
#include "backend/cuda/head_ops.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;  // lane l holds elements l + 32 k, k < kPerLane

// x's cache element: itself, or e4m3(x / scale) for the FP8 cache.
template <typename T, typename KV>
__device__ __forceinline__ KV to_cache(float x, float scale) {
  if constexpr (kIsFp8<KV>) {
    KV q;
    q.__x = float_to_e4m3(x / scale);
    return q;
  } else {
    return from_float<T>(x);
  }
}

// KV = T (16-bit cache) or fp8_e4m3. The steps and roundings are those of
// qk_norm_kernel, rope_kernel and kv_write(_fp8)_kernel, through the shared
// head_ops.cuh functions.
template <typename T, typename KV>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    qk_norm_rope_kv_write_kernel(QkNormRopeKvWriteParams p) {
  __shared__ float rows[kWarpsPerBlock][kMaxHeadDim];  // a warp's head for the rotation's pairs
  pdl_enter();
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int num_heads = p.num_q_heads + p.num_kv_heads;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (item >= p.num_tokens * num_heads) return;  // warp-uniform; only __syncwarp below
  const int64_t t = item / num_heads;
  const int h = static_cast<int>(item % num_heads);
  const int d_model = p.head_dim;
  T* head = static_cast<T*>(p.qkv) + t * p.row_width + static_cast<int64_t>(h) * d_model;

  float vals[kPerLane];  // the head's values, each exactly a T value
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    vals[k] = d < d_model ? to_float(head[d]) : 0.0f;
  }
  const float inv = head_rms_inv(vals, d_model, p.eps);
  const T* w = static_cast<const T*>(h < p.num_q_heads ? p.q_weight : p.k_weight);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < d_model) vals[k] = to_float(norm_apply<T>(vals[k], inv, w[d]));
  }
  const int32_t pos = p.positions[t];
  if (pos >= 0 && pos < p.num_positions) {
    float* row = rows[warp];
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < d_model) row[d] = vals[k];
    }
    __syncwarp();
    const int half = p.rotary_dim / 2;  // dims [rotary_dim, d_model) keep their normed value
    const float* table = p.cos_sin + static_cast<int64_t>(pos) * p.rotary_dim;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d >= p.rotary_dim) continue;
      const int i = d < half ? d : d - half;
      const float c = table[i], s = table[half + i];
      const float y = d < half ? rope_first(row[i], row[i + half], c, s)
                               : rope_second(row[i], row[i + half], c, s);
      vals[k] = to_float(from_float<T>(y));
    }
  }
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < d_model) head[d] = from_float<T>(vals[k]);
  }
  if (h < p.num_q_heads) return;

  const int64_t slot = p.slots[t];
  if (slot < 0 || slot >= p.num_slots) return;
  const int kv_head = h - p.num_q_heads;
  const int64_t offset = (slot * p.num_kv_heads + kv_head) * static_cast<int64_t>(d_model);
  const T* v_src = head + static_cast<int64_t>(p.num_kv_heads) * d_model;
  KV* k_dst = static_cast<KV*>(p.k_cache) + offset;
  KV* v_dst = static_cast<KV*>(p.v_cache) + offset;
  const float k_scale = kIsFp8<KV> ? p.scales[0] : 1.0f;
  const float v_scale = kIsFp8<KV> ? p.scales[1] : 1.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d >= d_model) continue;
    k_dst[d] = to_cache<T, KV>(vals[k], k_scale);
    if constexpr (kIsFp8<KV>) {
      v_dst[d] = to_cache<T, KV>(to_float(v_src[d]), v_scale);
    } else {
      v_dst[d] = v_src[d];
    }
  }
}

int64_t num_blocks(const QkNormRopeKvWriteParams& p) {
  const int64_t items = p.num_tokens * (p.num_q_heads + p.num_kv_heads);
  return (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
}

}  // namespace

bool qk_norm_rope_kv_write_supports(const QkNormRopeKvWriteParams& p) {
  const bool half = p.dtype == DType::kBF16 || p.dtype == DType::kF16;
  const bool fp8 = p.cache_dtype == DType::kF8E4M3;
  const bool cache_ok = fp8 ? p.scales != nullptr : p.cache_dtype == p.dtype;
  const bool norm_ok = p.q_weight != nullptr && p.k_weight != nullptr;
  return half && cache_ok && norm_ok && p.head_dim > 0 && p.head_dim <= kMaxHeadDim &&
         p.head_dim % 2 == 0 && p.rotary_dim > 0 && p.rotary_dim % 2 == 0 &&
         p.rotary_dim <= p.head_dim && p.num_tokens >= 0 && p.num_q_heads >= 0 && p.num_kv_heads > 0 &&
         num_blocks(p) <= 0x7fffffff;
}

cudaError_t launch_qk_norm_rope_kv_write(const QkNormRopeKvWriteParams& p, cudaStream_t stream) {
  if (!qk_norm_rope_kv_write_supports(p)) return cudaErrorInvalidValue;
  if (p.num_tokens == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(num_blocks(p));
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p.cache_dtype == DType::kF8E4M3) {
      launch_kernel(qk_norm_rope_kv_write_kernel<T, fp8_e4m3>, grid, kWarpsPerBlock * 32, 0, stream,
                    p);
    } else {
      launch_kernel(qk_norm_rope_kv_write_kernel<T, T>, grid, kWarpsPerBlock * 32, 0, stream, p);
    }
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
