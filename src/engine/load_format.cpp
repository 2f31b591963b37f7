#include "engine/load_format.h"

#include "core/log.h"
#include "model/dummy_int_quant.h"
#include "model/dummy_weights.h"

namespace pagoda {

Status check_load_format(const std::string& load_format) {
  for (const char* f : kLoadFormats)
    if (load_format == f) return Status::Ok();
  return make_error(ErrorCode::kInvalidArgument,
                    "--load-format must be auto or dummy, got \"" + load_format + "\"");
}

Result<OpenedModel> open_model_as(const ModelLocation& location, const std::string& load_format) {
  PAGODA_RETURN_IF_ERROR(check_load_format(load_format));
  if (load_format == "auto") return open_model(location);
  OpenedModel m;
  PAGODA_ASSIGN_OR_RETURN(static_cast<ModelDescription&>(m), describe_model(location));
  PAGODA_ASSIGN_OR_RETURN(m.weights, make_dummy_weights(m.config));
  if (location.format == ModelFormat::kHuggingFace) {  // AWQ / GPTQ: random blocks
    PAGODA_ASSIGN_OR_RETURN(m.weights,
                            make_dummy_int_quantized(std::move(m.weights), location.path));
  }
  const ModelConfig& c = m.config;
  log_warn(
      "model {}: {} ({} layers, hidden {}, {} heads / {} kv, head_dim {}, vocab {}) with {} "
      "(--load-format dummy): its outputs are meaningless",
      location.display_name, c.architecture, c.num_layers, c.hidden_size, c.num_heads,
      c.num_kv_heads, c.head_dim, c.vocab_size, m.weights->describe());
  return m;
}

}  // namespace pagoda
