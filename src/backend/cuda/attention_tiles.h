// Per-head-dim instantiations of the attention tile kernel
// (attention_kernel.cuh), the decode kernel (attention_decode.cuh) and the
// prefill kernel (attention_prefill.cuh, head dims <= 128);
// explicit instantiations live in attention_d*.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention.h"

namespace pagoda::cuda {

// kHeadDim: padded head dim (32, 64, 96, 128, 192 or 256) >= p.head_dim.
// T: the compute dtype (bf16 or f16); KV: the cache's element type, T or
// fp8_e4m3 (p.kv_dtype kF8E4M3, fp8_convert.cuh).
template <typename T, typename KV, int kHeadDim>
cudaError_t launch_attention_tiles(const AttentionParams& p, cudaStream_t stream);

template <typename T, typename KV, int kHeadDim>
cudaError_t configure_attention_tiles();

// The decode kernel: every sequence has one new token, Hq / Hkv <= 16.
template <typename T, typename KV, int kHeadDim>
cudaError_t launch_attention_decode(const AttentionParams& p, cudaStream_t stream);

template <typename T, typename KV, int kHeadDim>
cudaError_t configure_attention_decode();

// The decode kernel over an FP8 cache that converts K/V in registers
// (attention_decode_fp8.cuh): p.head_dim % 16 == 0, 16-byte aligned caches.
template <typename T, int kHeadDim>
cudaError_t launch_attention_decode_fp8(const AttentionParams& p, cudaStream_t stream);

template <typename T, int kHeadDim>
cudaError_t configure_attention_decode_fp8();

// The prefill kernel (kHeadDim <= 128): max_query_len > 1 batches.
template <typename T, typename KV, int kHeadDim>
cudaError_t launch_attention_prefill(const AttentionParams& p, cudaStream_t stream);

template <typename T, typename KV, int kHeadDim>
cudaError_t configure_attention_prefill();

// Row tiles of kAttentionPrefillBlockM rows the prefill kernel's grid has
// (from the host hints).
inline int64_t attention_prefill_m_tiles(const AttentionParams& p) {
  if (p.num_kv_heads <= 0) return 0;
  const int64_t rows = static_cast<int64_t>(p.max_query_len) * (p.num_q_heads / p.num_kv_heads);
  return (rows + kAttentionPrefillBlockM - 1) / kAttentionPrefillBlockM;
}

}  // namespace pagoda::cuda
