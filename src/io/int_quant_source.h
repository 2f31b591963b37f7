// AWQ and GPTQ safetensors checkpoints as a WeightSource whose quantized
// linear weights are block tensors (core/dtype.h's group formats), so the
// weight loader keeps them quantized on the device exactly as it keeps GGUF
// blocks (model/weight_loader.h), and the backends' block linear computes
// from them.
//
// A quantized module <m> is the tensors <m>.qweight, <m>.qzeros, <m>.scales
// (f16) and, for GPTQ, optionally <m>.g_idx; it appears here as one tensor
// <m>.weight [N, K] (out, in features) whose read_blocks() is the module
// repacked into w{bits}g{G} blocks and whose read() is the same weight
// dequantized to f32. Every other tensor (norms, embeddings, an unquantized
// lm_head, modules_to_not_convert) passes through unchanged. The packed
// layouts, with w[n, k] = (q[k, n] - z[g, n]) * s[g, n], g the group of k:
//
//  AWQ (GEMM):  qweight i32 [K, N/8]: q[k, n] is nibble kAwqNibble[n % 8] of
//               qweight[k, n / 8] (AutoAWQ packs columns 0,2,4,6,1,3,5,7
//               into nibbles 0..7); qzeros i32 [K/G, N/8] the same;
//               scales [K/G, N]; g = k / G.
//  GPTQ:        qweight i32 [K*b/32, N]: q[k, n] is the b-bit field
//               (k % (32/b)) of qweight[k / (32/b), n]; qzeros i32
//               [K/G, N*b/32]: field (n % (32/b)) of qzeros[g, n / (32/b)];
//               scales [K/G, N]; g = g_idx[k] when g_idx is present (act
//               order), else k / G. checkpoint_format gptq (v1) stores
//               z - 1: z = field + 1 (up to 2^b, as vLLM's kernels read it,
//               no wrap), gptq_v2 stores z.
//
// Group -1 (per channel) is one group of K. A group of G is stored as
// blocks of the largest of 128 / 64 / 32 dividing G (its scale and zero
// repeated: exact). With act order (g_idx not k / G), K is permuted at load
// so each group's rows are contiguous (a stable sort by group: the _perm
// formats, the permutation after the blocks); the backends gather x by it.
// Each group must then hold exactly G rows.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "io/int_quant_config.h"
#include "io/weight_source.h"

namespace pagoda {

// `inner` with its AWQ / GPTQ modules presented as block weights. Checks
// every module now (errors name the tensor: a missing qzeros / scales /
// g_idx, shapes that disagree, K not a multiple of the group, non-f16
// scales, g_idx outside [0, K/G) or groups not of G rows, a
// modules_to_not_convert module that is quantized).
Result<std::unique_ptr<WeightSource>> wrap_int_quantized(std::unique_ptr<WeightSource> inner,
                                                         const IntQuantConfig& config);

// wrap_int_quantized when `folder`/config.json has an AWQ / GPTQ
// quantization_config (io/int_quant_config.h), logging the format; `inner`
// unchanged otherwise.
Result<std::unique_ptr<WeightSource>> open_int_quantized(const std::string& folder,
                                                         std::unique_ptr<WeightSource> inner);

}  // namespace pagoda
