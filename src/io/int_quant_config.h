// The quantization_config of an AWQ or GPTQ checkpoint (config.json), the
// integer weight formats pagoda keeps quantized (io/int_quant_source.h).
// Field semantics follow AutoAWQ, AutoGPTQ / GPTQModel and vLLM's awq.py /
// gptq.py; every recognized field pagoda cannot honour is refused by name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pagoda {

enum class IntQuantMethod { kAwq, kGptq };

struct IntQuantConfig {
  IntQuantMethod method = IntQuantMethod::kGptq;
  int bits = 4;              // AWQ: 4; GPTQ: 4 or 8
  int64_t group_size = 128;  // elements of K per scale / zero; -1: one group of all K
  bool desc_act = false;     // GPTQ: row k of K is in group g_idx[k] (act-order)
  bool sym = true;           // GPTQ: zero points 2^(bits-1) (informational: stored zeros rule)
  // GPTQ checkpoint_format "gptq" (v1, the default): the stored zero is
  // z - 1, so z = stored + 1; "gptq_v2" and AWQ store z.
  bool zero_plus_one = false;
  // Module names (or name parts, matched as substrings like vLLM) left
  // unquantized: they must have a plain .weight.
  std::vector<std::string> modules_to_not_convert;
};

// "awq 4-bit group 128" / "gptq 8-bit per-channel desc_act (v1 zeros)".
std::string describe(const IntQuantConfig& q);

// The config's quantization_config when its quant_method is "awq" or
// "gptq"; nullopt without a quantization_config or for another method
// (left to the other quantization formats). Errors name `path` and the field:
// bits 2/3, group sizes other than -1 / multiples of 32, AWQ versions other
// than gemm, zero_point false, GPTQ checkpoint formats other than gptq /
// gptq_v2 (marlin, exllama-serialized), is_marlin_format true.
Result<std::optional<IntQuantConfig>> parse_int_quant_config(std::string_view config_json,
                                                             const std::string& path);

}  // namespace pagoda
