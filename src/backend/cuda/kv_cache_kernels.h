// Paged KV cache writes: kv_write (new tokens' k/v into their slots; an FP8
// cache quantises them) and copy_blocks (copy-on-write of whole blocks).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

struct KvWriteParams {
  DType dtype = DType::kBF16;
  const void* qkv = nullptr;     // [num_tokens, row_width] = [q | k | v] heads
  int64_t num_tokens = 0;
  int64_t row_width = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  const int32_t* slots = nullptr;  // [num_tokens]; < 0: skip the token
  void* k_cache = nullptr;       // [num_slots, num_kv_heads, head_dim]
  void* v_cache = nullptr;
  int64_t num_slots = 0;         // num_blocks * block_size; slots >= this are skipped
  // kF8E4M3: the cache holds e4m3(x / scale) (core/fp8.h rounding,
  // saturating), scales [2] = (k_scale, v_scale) read on the device (graph
  // replays see the current values); else `dtype` and scales unused.
  DType cache_dtype = DType::kBF16;
  const float* scales = nullptr;
};

cudaError_t launch_kv_write(const KvWriteParams& p, cudaStream_t stream);

// Block pairs per launch (they travel as kernel parameters, so the op needs
// no device staging and stays graph-capturable).
constexpr int kMaxCopyPairs = 128;

struct CopyBlocksParams {
  void* k_cache = nullptr;       // [num_blocks, block_bytes]
  void* v_cache = nullptr;
  int64_t block_bytes = 0;
  int64_t num_blocks = 0;
  int num_pairs = 0;             // <= kMaxCopyPairs
  int32_t src[kMaxCopyPairs];
  int32_t dst[kMaxCopyPairs];
};

// Block src[i] -> dst[i] in k and v; pairs with an id out of range are
// skipped. A dst must not also be a src of the same call.
cudaError_t launch_copy_blocks(const CopyBlocksParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
