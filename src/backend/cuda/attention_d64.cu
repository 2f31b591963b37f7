// Attention tile, decode and prefill kernel instantiations for padded head dim 64.
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_kernel.cuh"
#include "backend/cuda/attention_prefill.cuh"

namespace pagoda::cuda {

template cudaError_t launch_attention_tiles<bf16, 64>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_tiles<f16, 64>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_tiles<bf16, 64>();
template cudaError_t configure_attention_tiles<f16, 64>();
template cudaError_t launch_attention_decode<bf16, 64>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_decode<f16, 64>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_decode<bf16, 64>();
template cudaError_t configure_attention_decode<f16, 64>();
template cudaError_t launch_attention_prefill<bf16, 64>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_prefill<f16, 64>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_prefill<bf16, 64>();
template cudaError_t configure_attention_prefill<f16, 64>();

}  // namespace pagoda::cuda
