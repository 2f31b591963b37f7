#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_convert.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/kv_cache_kernels.h"

namespace pagoda::cuda {
namespace {

// One block per token; copies the token's Hkv*D k values and v values.
template <typename T, int kVec>
__global__ void kv_write_kernel(KvWriteParams p) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int64_t slot = p.slots[t];
  if (slot < 0 || slot >= p.num_slots) return;
  const int64_t width = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
  const T* k_src = static_cast<const T*>(p.qkv) + t * p.row_width +
                   static_cast<int64_t>(p.num_q_heads) * p.head_dim;
  const T* v_src = k_src + width;
  T* k_dst = static_cast<T*>(p.k_cache) + slot * width;
  T* v_dst = static_cast<T*>(p.v_cache) + slot * width;
  for (int64_t i = threadIdx.x * kVec; i < width; i += static_cast<int64_t>(blockDim.x) * kVec) {
    store_vec<T, kVec>(k_dst + i, load_vec<T, kVec>(k_src + i));
    store_vec<T, kVec>(v_dst + i, load_vec<T, kVec>(v_src + i));
  }
}

// The FP8 cache's write: one block per token, kVec elements per access;
// each element x becomes float_to_e4m3(x / scale) in one pass.
template <typename T, int kVec>
__global__ void kv_write_fp8_kernel(KvWriteParams p) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int64_t slot = p.slots[t];
  if (slot < 0 || slot >= p.num_slots) return;
  const float k_scale = p.scales[0];
  const float v_scale = p.scales[1];
  const int64_t width = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
  const T* k_src = static_cast<const T*>(p.qkv) + t * p.row_width +
                   static_cast<int64_t>(p.num_q_heads) * p.head_dim;
  const T* v_src = k_src + width;
  uint8_t* k_dst = static_cast<uint8_t*>(p.k_cache) + slot * width;
  uint8_t* v_dst = static_cast<uint8_t*>(p.v_cache) + slot * width;
  for (int64_t i = threadIdx.x * kVec; i < width; i += static_cast<int64_t>(blockDim.x) * kVec) {
    const Vec<T, kVec> k = load_vec<T, kVec>(k_src + i);
    const Vec<T, kVec> v = load_vec<T, kVec>(v_src + i);
    Vec<uint8_t, kVec> kq, vq;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      kq.v[j] = float_to_e4m3(to_float(k.v[j]) / k_scale);
      vq.v[j] = float_to_e4m3(to_float(v.v[j]) / v_scale);
    }
    store_vec<uint8_t, kVec>(k_dst + i, kq);
    store_vec<uint8_t, kVec>(v_dst + i, vq);
  }
}

// grid (num_pairs, 2): blockIdx.y selects k (0) or v (1).
template <typename V>
__global__ void copy_blocks_kernel(CopyBlocksParams p) {
  pdl_enter();
  const int i = blockIdx.x;
  const int64_t src = p.src[i];
  const int64_t dst = p.dst[i];
  if (src < 0 || src >= p.num_blocks || dst < 0 || dst >= p.num_blocks || src == dst) return;
  char* base = static_cast<char*>(blockIdx.y == 0 ? p.k_cache : p.v_cache);
  const V* s = reinterpret_cast<const V*>(base + src * p.block_bytes);
  V* d = reinterpret_cast<V*>(base + dst * p.block_bytes);
  const int64_t n = p.block_bytes / static_cast<int64_t>(sizeof(V));
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) d[j] = s[j];
}

}  // namespace

cudaError_t launch_kv_write(const KvWriteParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return cudaSuccess;
  if (p.num_tokens > 0x7fffffff) return cudaErrorInvalidValue;
  const bool fp8 = p.cache_dtype == DType::kF8E4M3;
  if (!fp8 && p.cache_dtype != p.dtype) return cudaErrorInvalidValue;
  if (fp8 && p.scales == nullptr) return cudaErrorInvalidValue;
  const uintptr_t cache_align = fp8 ? 8 : 16;  // 8 elements
  const bool vec8 = p.head_dim % 8 == 0 && p.row_width % 8 == 0 && is_aligned(p.qkv, 16) &&
                    is_aligned(p.k_cache, cache_align) && is_aligned(p.v_cache, cache_align);
  const unsigned grid = static_cast<unsigned>(p.num_tokens);
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (fp8) {
      if (vec8) {
        launch_kernel(kv_write_fp8_kernel<T, 8>, grid, 128, 0, stream, p);
      } else {
        launch_kernel(kv_write_fp8_kernel<T, 1>, grid, 128, 0, stream, p);
      }
    } else if (vec8) {
      launch_kernel(kv_write_kernel<T, 8>, grid, 128, 0, stream, p);
    } else {
      launch_kernel(kv_write_kernel<T, 1>, grid, 128, 0, stream, p);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_copy_blocks(const CopyBlocksParams& p, cudaStream_t stream) {
  if (p.num_pairs == 0 || p.block_bytes == 0) return cudaSuccess;
  if (p.num_pairs < 0 || p.num_pairs > kMaxCopyPairs) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(p.num_pairs), 2);
  const bool vec16 =
      p.block_bytes % 16 == 0 && is_aligned(p.k_cache, 16) && is_aligned(p.v_cache, 16);
  if (vec16) {
    launch_kernel(copy_blocks_kernel<uint4>, grid, 256, 0, stream, p);
  } else if (p.block_bytes % 2 == 0 && is_aligned(p.k_cache, 2) && is_aligned(p.v_cache, 2)) {
    launch_kernel(copy_blocks_kernel<uint16_t>, grid, 256, 0, stream, p);
  } else {
    launch_kernel(copy_blocks_kernel<uint8_t>, grid, 256, 0, stream, p);
  }
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
