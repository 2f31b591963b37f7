// The attention block's steps between the qkv projection and attention in
// one kernel: per-head q/k RMSNorm, rotate-half rotary embedding and the
// paged KV write (Backend::qk_norm_rope_kv_write of a model with q/k norms).
// Bit-exact with launch_qk_norm, launch_rope and launch_kv_write run in turn.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

struct QkNormRopeKvWriteParams {
  DType dtype = DType::kBF16;
  void* qkv = nullptr;  // [num_tokens, row_width] = [q | k | v] heads; q, k updated in place
  int64_t num_tokens = 0;
  int64_t row_width = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // even, <= 256
  int rotary_dim = 0;  // even, in (0, head_dim]: dims [rotary_dim, head_dim) are not rotated
  // Both [head_dim] in dtype (as launch_qk_norm); without norms the rope
  // and kv_write kernels are faster (CudaBackend::qk_norm_rope_kv_write).
  const void* q_weight = nullptr;
  const void* k_weight = nullptr;
  float eps = 1e-6f;
  // As launch_rope: positions [num_tokens]; cos_sin [num_positions, rotary_dim]
  // f32; a token whose position is outside [0, num_positions) is not rotated.
  const int32_t* positions = nullptr;
  const float* cos_sin = nullptr;
  int64_t num_positions = 0;
  // As launch_kv_write: slots [num_tokens] (< 0 or >= num_slots: skipped);
  // caches [num_slots, num_kv_heads, head_dim] in dtype, or kF8E4M3 with
  // scales [2] = (k_scale, v_scale) on the device.
  const int32_t* slots = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int64_t num_slots = 0;
  DType cache_dtype = DType::kBF16;
  const float* scales = nullptr;
};

// True when launch_qk_norm_rope_kv_write handles p (both norm weights set,
// head_dim even and <= 256, rotary_dim as above, the cache dtype, the grid
// size).
bool qk_norm_rope_kv_write_supports(const QkNormRopeKvWriteParams& p);

// One warp per (token, q or k head): loads the head, norms it, rotates it,
// stores it back to qkv; a k head's warp also writes it and its v head to
// the token's cache slot.
cudaError_t launch_qk_norm_rope_kv_write(const QkNormRopeKvWriteParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
