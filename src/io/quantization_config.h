// How a checkpoint's linear weights are quantised: config.json's
// quantization_config, NVIDIA ModelOpt's hf_quant_config.json, or FP8 asked
// for at load (--quantization fp8). pagoda runs FP8 e4m3 W8A8 only (the
// arithmetic: backend/linear_weight.h); every other scheme, and every field
// value it cannot honour, is refused with an error naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pagoda {

enum class QuantMethod {
  kNone,               // unquantised weights
  kCompressedTensors,  // quant_method compressed-tensors, format float- / naive-quantized
  kModelOpt,           // quant_method modelopt / hf_quant_config.json, quant_algo FP8
  kFp8,                // quant_method fp8 (per-tensor, or weight_block_size blocks)
  kOnline,             // --quantization fp8: bf16/fp16/f32 weights quantised at load
};

// How the scales of an FP8 weight tensor `<module>.weight` are stored.
enum class Fp8WeightScales {
  kTensor,   // one scale, `<module>.weight_scale` of one element ([] or [1])
  kChannel,  // one per output row, `<module>.weight_scale` [N, 1] or [N]
  kBlock,    // one per [block, block] tile, `<module>.<scale_name>` [ceil(N/b), ceil(K/b)]
};

struct QuantizationConfig {
  QuantMethod method = QuantMethod::kNone;
  Fp8WeightScales weight_scales = Fp8WeightScales::kTensor;
  int32_t block = 0;  // kBlock: the tile's rows = columns (weight_block_size)
  // The block scales' tensor suffix: "weight_scale_inv" (quant_method fp8),
  // "weight_scale" (compressed-tensors strategy block).
  std::string block_scale_name = "weight_scale_inv";
  // true: each linear's activations use its checkpoint's per-tensor
  // `<module>.input_scale`; false: dynamic, per token (per token and block
  // columns with kBlock).
  bool static_activations = false;
  // Modules the checkpoint left unquantised (ignore / exclude_modules /
  // ignored_layers). Informational: a linear weight loads as FP8 exactly when
  // its tensor is stored as F8_E4M3.
  std::vector<std::string> ignore;

  bool fp8() const { return method != QuantMethod::kNone; }
};

// `quantization_config` of config.json (its JSON text); `where` names it in
// errors, e.g. "/m/config.json: quantization_config". quant_method awq / gptq
// gives method kNone: those are io/int_quant_config.h's.
Result<QuantizationConfig> parse_quantization_config(std::string_view json_text,
                                                     const std::string& where);
// ModelOpt's hf_quant_config.json text ({"quantization": {"quant_algo": ...}}).
Result<QuantizationConfig> parse_hf_quant_config(std::string_view json_text,
                                                 const std::string& path);

// The online scheme of --quantization fp8: per-channel weight scales, dynamic
// per-token activations.
QuantizationConfig online_fp8_config();

// --quantization's value: "fp8" (the online scheme, or the checkpoint's own
// FP8 scheme when it has one) or empty (the checkpoint as it is). Errors name
// the flag and the supported values.
Status check_quantization_flag(std::string_view value);

// The weights' precision for logs, /metrics and --help: "fp8 (w8a8, dynamic
// per-token; per-channel weight scales; compressed-tensors)"; for kNone
// `unquantised` (e.g. "bf16").
std::string describe_quantization(const QuantizationConfig& q, std::string_view unquantised);

}  // namespace pagoda
