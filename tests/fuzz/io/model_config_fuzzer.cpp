// libFuzzer target: a model folder's config texts on arbitrary bytes —
// config.json (parse_hf_config, which reads quantization_config: the FP8
// schemes, and awq / gptq left to their parser), ModelOpt's
// hf_quant_config.json and the AWQ / GPTQ quantization_config. Each must
// return a value or an error naming the field, never crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/hf_config.h"
#include "io/int_quant_config.h"
#include "io/quantization_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy so that a read past `size` is caught.
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)pagoda::parse_hf_config(text, "fuzz/config.json");
  (void)pagoda::parse_hf_quant_config(text, "fuzz/hf_quant_config.json");
  (void)pagoda::parse_int_quant_config(text, "fuzz/config.json");
  return 0;
}
