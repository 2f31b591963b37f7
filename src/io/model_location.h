// Finding a model: a Hugging Face folder (config.json + safetensors), a .gguf
// file, or a repo id resolved offline from the Hugging Face cache.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "io/hub/hub_options.h"  // hf_hub_cache_dir()

namespace pagoda {

enum class ModelFormat { kHuggingFace, kGguf };

struct ModelLocation {
  ModelFormat format = ModelFormat::kHuggingFace;
  std::string path;          // folder (kHuggingFace) or .gguf file (kGguf)
  std::string display_name;  // repo id, folder name or file name, for logs and /v1/models
};

// spec: a folder with config.json, a .gguf file, or a repo id "Org/Name"
// resolved OFFLINE from the Hugging Face cache: $HF_HUB_CACHE, else
// $HF_HOME/hub, else ~/.cache/huggingface/hub; models--Org--Name/snapshots/<rev>/
// where <rev> comes from refs/main (else the newest snapshot). A folder that
// has no config.json but exactly one .gguf file resolves to that file.
// Errors list the places searched.
Result<ModelLocation> resolve_model(std::string_view spec);

}  // namespace pagoda
