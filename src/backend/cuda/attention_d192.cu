// Attention tile and decode kernel instantiations for padded head dim 192.
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_kernel.cuh"

namespace pagoda::cuda {

template cudaError_t launch_attention_tiles<bf16, 192>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_tiles<f16, 192>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_tiles<bf16, 192>();
template cudaError_t configure_attention_tiles<f16, 192>();
template cudaError_t launch_attention_decode<bf16, 192>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_decode<f16, 192>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_decode<bf16, 192>();
template cudaError_t configure_attention_decode<f16, 192>();

}  // namespace pagoda::cuda
