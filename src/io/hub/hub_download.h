// Downloading a model repo into the hub cache, as huggingface_hub's
// snapshot_download does, limited to the files pagoda loads.
#pragma once

#include <filesystem>

#include "core/result.h"
#include "io/hub/gguf_pick.h"
#include "io/hub/hub_options.h"

namespace pagoda {

struct HubModelFiles {
  std::filesystem::path path;  // the snapshot folder, or the .gguf file in it
  bool is_gguf = false;
};

// Lists `spec.repo_id` at options.revision and fetches what is missing from
// the cache under options.cache_dir (refs/<revision>, blobs/, snapshots/):
//  - with a quant tag, or for a repo without config.json: the one .gguf file
//    pick_gguf_file chooses (tag default kDefaultGgufQuant);
//  - else config, tokenizer and chat-template files and the safetensors
//    weights (select_metadata_files, select_weight_files).
// Files already in the snapshot are not fetched again; blobs are locked while
// written. Needs options.offline == false.
Result<HubModelFiles> download_from_hub(const RepoModelSpec& spec, const HubOptions& options);

}  // namespace pagoda
