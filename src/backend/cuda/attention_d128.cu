// Attention tile, decode and prefill kernel instantiations for padded head dim 128.
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_kernel.cuh"
#include "backend/cuda/attention_prefill.cuh"

namespace pagoda::cuda {

template cudaError_t launch_attention_tiles<bf16, 128>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_tiles<f16, 128>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_tiles<bf16, 128>();
template cudaError_t configure_attention_tiles<f16, 128>();
template cudaError_t launch_attention_decode<bf16, 128>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_decode<f16, 128>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_decode<bf16, 128>();
template cudaError_t configure_attention_decode<f16, 128>();
template cudaError_t launch_attention_prefill<bf16, 128>(const AttentionParams&, cudaStream_t);
template cudaError_t launch_attention_prefill<f16, 128>(const AttentionParams&, cudaStream_t);
template cudaError_t configure_attention_prefill<bf16, 128>();
template cudaError_t configure_attention_prefill<f16, 128>();

}  // namespace pagoda::cuda
