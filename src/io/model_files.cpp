// open_model: describe_model + the weights of the format.
#include "io/model_files.h"

#include "core/log.h"
#include "io/gguf_model.h"
#include "io/int_quant_source.h"
#include "io/safetensors.h"

namespace pagoda {

Result<OpenedModel> open_model(const ModelLocation& location) {
  OpenedModel m;
  PAGODA_ASSIGN_OR_RETURN(static_cast<ModelDescription&>(m), describe_model(location));
  if (location.format == ModelFormat::kHuggingFace) {
    PAGODA_ASSIGN_OR_RETURN(m.weights, open_safetensors_folder(location.path));
    PAGODA_ASSIGN_OR_RETURN(m.weights, open_int_quantized(location.path, std::move(m.weights)));
  } else {
    PAGODA_ASSIGN_OR_RETURN(m.weights, open_gguf_weights(m.gguf, m.config));
  }
  const ModelConfig& c = m.config;
  log_info(
      "model {}: {} ({} layers, hidden {}, {} heads / {} kv, head_dim {}, vocab {}), weights: {}",
      location.display_name, c.architecture, c.num_layers, c.hidden_size, c.num_heads,
      c.num_kv_heads, c.head_dim, c.vocab_size, m.weights->describe());
  return m;
}

}  // namespace pagoda
