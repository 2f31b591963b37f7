// open_model: describe_model + the weights of the format.
#include "io/model_files.h"

#include <filesystem>

#include "core/log.h"
#include "io/gguf_model.h"
#include "io/int_quant_source.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"

namespace pagoda {

namespace {

// safetensors when the folder has model.safetensors(.index.json); else a
// PyTorch checkpoint when it has pytorch_model.bin(.index.json) (published
// EAGLE heads); else the safetensors error.
Result<std::unique_ptr<WeightSource>> open_hf_weights(const std::string& folder) {
  const std::filesystem::path dir(folder);
  std::error_code ec;
  const bool safetensors = std::filesystem::exists(dir / "model.safetensors", ec) ||
                           std::filesystem::exists(dir / "model.safetensors.index.json", ec);
  const bool torch = std::filesystem::exists(dir / "pytorch_model.bin", ec) ||
                     std::filesystem::exists(dir / "pytorch_model.bin.index.json", ec);
  if (!safetensors && torch) return open_torch_checkpoint_folder(folder);
  Result<std::unique_ptr<WeightSource>> weights = open_safetensors_folder(folder);
  if (!weights.ok() && weights.error().code == ErrorCode::kNotFound && !safetensors) {
    return make_error(ErrorCode::kNotFound,
                      weights.error().message + ", or pytorch_model.bin(.index.json)");
  }
  return weights;
}

}  // namespace

Result<OpenedModel> open_model(const ModelLocation& location) {
  OpenedModel m;
  PAGODA_ASSIGN_OR_RETURN(static_cast<ModelDescription&>(m), describe_model(location));
  if (location.format == ModelFormat::kHuggingFace) {
    PAGODA_ASSIGN_OR_RETURN(m.weights, open_hf_weights(location.path));
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
