// A model family: which configs it accepts and what its tensors are called.
// Every supported family is a pre-norm decoder (RMSNorm, GQA attention with
// RoPE, SwiGLU MLP); families differ in checks and in optional tensors
// (QKV biases, q/k norms). One file per family: llama.cpp (llama, mistral),
// qwen2.cpp, qwen3.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "io/model_config.h"

namespace pagoda {

// Hugging Face names of one decoder layer's tensors; an empty name means the
// family has no such tensor.
struct LayerTensorNames {
  std::string input_norm;
  std::string q_proj, k_proj, v_proj;
  std::string q_bias, k_bias, v_bias;
  std::string q_norm, k_norm;
  std::string o_proj;
  std::string post_attn_norm;
  std::string gate_proj, up_proj, down_proj;
};

struct GlobalTensorNames {
  std::string embed;
  std::string final_norm;
  std::string lm_head;  // tied to embed when absent from the file or tie_word_embeddings
};

struct Architecture {
  const char* name;  // ModelConfig::architecture, e.g. "llama"
  // Checks what this family needs beyond validate_decoder_config; errors name
  // the field.
  Status (*validate)(const ModelConfig& config);
  LayerTensorNames (*layer_names)(const ModelConfig& config, int64_t layer);
  GlobalTensorNames (*global_names)();
};

// The family for config.architecture, after validate_decoder_config and the
// family's validate. Unsupported family: error listing the supported ones.
Result<const Architecture*> find_architecture(const ModelConfig& config);

// Checks shared by every family: positive sizes, heads divisible by kv heads,
// even head_dim, positive eps / theta / max positions. Errors name the field.
Status validate_decoder_config(const ModelConfig& config);

// Families (one file each).
const Architecture& llama_architecture();
const Architecture& mistral_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();
// The standard Hugging Face decoder names ("model.layers.N.self_attn.q_proj.weight", ...)
// that llama-style families start from; q/k/v biases when config.attention_bias.
LayerTensorNames llama_layer_names(const ModelConfig& config, int64_t layer);
GlobalTensorNames llama_global_names();

}  // namespace pagoda
