// Finding a model: a Hugging Face folder (config.json + safetensors), a .gguf
// file, or a repo id from the Hugging Face cache, downloaded from the hub
// when it is missing there and the options allow it.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "io/hub/hub_options.h"

namespace pagoda {

enum class ModelFormat { kHuggingFace, kGguf };

struct ModelLocation {
  ModelFormat format = ModelFormat::kHuggingFace;
  std::string path;          // folder (kHuggingFace) or .gguf file (kGguf)
  std::string display_name;  // repo id, folder name or file name, for logs and /v1/models
};

// spec: a folder with config.json, a .gguf file, or a repo id "Org/Name"
// (optionally "Org/Name:QUANT" for a GGUF repo) looked up in the hub cache
// hub.cache_dir (empty: hf_hub_cache_dir()) at
// models--Org--Name/snapshots/<commit>/, where <commit> is hub.revision when
// it is a commit id, else refs/<revision> (for "main" without a ref, the
// newest snapshot). A folder that has no config.json but .gguf files
// resolves to its only one, or to the one of QUANT (default Q4_K_M when
// there are several).
// When the cached snapshot is missing or incomplete (no config.json, .gguf
// or safetensors shard of the index) and hub.offline is false, the repo is
// downloaded first (download_from_hub). The default options never touch the
// network. Errors list the places searched.
Result<ModelLocation> resolve_model(std::string_view spec, const HubOptions& hub = HubOptions{});

}  // namespace pagoda
