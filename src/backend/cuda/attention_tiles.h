// Per-head-dim instantiations of the attention tile kernel
// (attention_kernel.cuh) and the decode kernel (attention_decode.cuh);
// explicit instantiations live in attention_d*.cu.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/attention.h"

namespace pagoda::cuda {

// kHeadDim: padded head dim (32, 64, 96, 128, 192 or 256) >= p.head_dim.
template <typename T, int kHeadDim>
cudaError_t launch_attention_tiles(const AttentionParams& p, cudaStream_t stream);

template <typename T, int kHeadDim>
cudaError_t configure_attention_tiles();

// The decode kernel: every sequence has one new token, Hq / Hkv <= 16.
template <typename T, int kHeadDim>
cudaError_t launch_attention_decode(const AttentionParams& p, cudaStream_t stream);

template <typename T, int kHeadDim>
cudaError_t configure_attention_decode();

}  // namespace pagoda::cuda
