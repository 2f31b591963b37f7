// Dequantization of the ggml block formats (the block DTypes of dtype.h) to
// f32, bit-exact with gguf-py's gguf.quants.dequantize. The one definition of
// what a block means: the GGUF loader's load-time dequantization, the CPU
// backend's quantized linear and the CUDA kernels' tests all use it.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace pagoda {

// out[0, n) = the n elements held by the blocks at `blocks`. `type` must be a
// block dtype and n a multiple of dtype_block_elems(type).
void dequantize_blocks(DType type, const void* blocks, int64_t n, float* out);

}  // namespace pagoda
