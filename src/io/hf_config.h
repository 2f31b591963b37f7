// Hugging Face config.json → ModelConfig and generation_config.json →
// GenerationDefaults.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "io/model_config.h"

namespace pagoda {

// Parses config.json text. `path` names the file in errors. Supported
// architectures: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM (model_type is used when "architectures" is absent).
// Accepts rope_scaling (transformers 4) and rope_parameters (transformers 5).
Result<ModelConfig> parse_hf_config(std::string_view json_text, const std::string& path);
Result<ModelConfig> load_hf_config(const std::string& path);

// Parses generation_config.json text (temperature, top_p, top_k, min_p,
// repetition_penalty, max_new_tokens, eos_token_id int or list).
Result<GenerationDefaults> parse_generation_config(std::string_view json_text,
                                                   const std::string& path);
Result<GenerationDefaults> load_generation_config(const std::string& path);
// generation_config.json in `folder` when that file exists; all unset otherwise.
Result<GenerationDefaults> load_folder_generation_config(const std::string& folder);

}  // namespace pagoda
