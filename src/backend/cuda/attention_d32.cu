// Attention tile, decode and prefill kernel instantiations for padded head dim 32.
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_kernel.cuh"
#include "backend/cuda/attention_prefill.cuh"

namespace pagoda::cuda {

template cudaError_t launch_attention_tiles<bf16, 32>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_tiles<f16, 32>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_tiles<bf16, 32>();
template cudaError_t configure_attention_tiles<f16, 32>();
template cudaError_t launch_attention_decode<bf16, 32>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_decode<f16, 32>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_decode<bf16, 32>();
template cudaError_t configure_attention_decode<f16, 32>();
template cudaError_t launch_attention_prefill<bf16, 32>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_prefill<f16, 32>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_prefill<bf16, 32>();
template cudaError_t configure_attention_prefill<f16, 32>();

}  // namespace pagoda::cuda
