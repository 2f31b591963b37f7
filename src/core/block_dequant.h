// Dequantization of the block formats (the block DTypes of dtype.h) to f32:
// the ggml formats bit-exact with gguf-py's gguf.quants.dequantize, the group
// formats (AWQ / GPTQ repacked) as (q - z) * s in f32. The one definition of
// what a block means: the GGUF loader's load-time dequantization, the CPU
// backend's quantized linear and the CUDA kernels' tests all use it.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace pagoda {

// out[0, n) = the n elements held by the blocks at `blocks`. `type` must be a
// block dtype and n a multiple of dtype_block_elems(type).
// A _perm group format gives its stored (permuted) column order here.
void dequantize_blocks(DType type, const void* blocks, int64_t n, float* out);

// Rows [first_row, first_row + num_rows) of the block-dtype weight [n, k] at
// w, in logical column order (a _perm format's columns un-permuted by the
// permutation after its rows) into out [num_rows, k].
void dequantize_weight_rows(DType type, const void* w, int64_t n, int64_t k, int64_t first_row,
                            int64_t num_rows, float* out);

}  // namespace pagoda
