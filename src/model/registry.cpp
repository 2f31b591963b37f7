// The registry of model families: find_architecture's table.
#include <string>

#include "model/architecture.h"

namespace pagoda {

// One line per family, in the order errors list them: F(name) registers
// name_architecture(), defined in name.cpp.
#define PAGODA_MODEL_FAMILIES(F) \
  F(llama)                       \
  F(mistral)                     \
  F(qwen2)                       \
  F(qwen3)                       \
  F(phi3)                        \
  F(gemma2)                      \
  F(gemma3)                      \
  F(mixtral)                     \
  F(qwen2_moe)                   \
  F(qwen3_moe)

#define PAGODA_DECLARE_FAMILY(name) const Architecture& name##_architecture();
PAGODA_MODEL_FAMILIES(PAGODA_DECLARE_FAMILY)
#undef PAGODA_DECLARE_FAMILY

namespace {

#define PAGODA_FAMILY_ENTRY(name) &name##_architecture,
const Architecture& (*const kFamilies[])() = {PAGODA_MODEL_FAMILIES(PAGODA_FAMILY_ENTRY)};
#undef PAGODA_FAMILY_ENTRY

}  // namespace

Result<const Architecture*> find_architecture(const ModelConfig& config) {
  std::string supported;
  for (auto family : kFamilies) {
    const Architecture& a = family();
    if (config.architecture == a.name) {
      PAGODA_RETURN_IF_ERROR(validate_decoder_config(config));
      PAGODA_RETURN_IF_ERROR(a.validate(config));
      return &a;
    }
    supported += std::string(supported.empty() ? "" : ", ") + a.name;
  }
  return make_error(ErrorCode::kUnsupported, "model architecture \"" + config.architecture +
                                                 "\" is not supported (supported: " + supported +
                                                 ")");
}

}  // namespace pagoda
