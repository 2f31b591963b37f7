#include "io/hub/hub_download.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/log.h"
#include "io/hub/file_lock.h"
#include "io/hub/hub_cache.h"
#include "io/hub/hub_client.h"
#include "io/hub/model_files_select.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexFile = "model.safetensors.index.json";

bool contains(const std::vector<std::string>& files, const std::string& name) {
  return std::find(files.begin(), files.end(), name) != files.end();
}

// One repo at one commit: fetches files into its snapshot.
class SnapshotFetcher {
 public:
  SnapshotFetcher(HubClient& client, const HubRepoCache& cache, std::string repo_id,
                  std::string commit)
      : client_(client), cache_(cache), repo_id_(std::move(repo_id)), commit_(std::move(commit)) {}

  Status fetch(const std::vector<std::string>& files) {
    for (const std::string& f : files) PAGODA_RETURN_IF_ERROR(fetch_one(f));
    return Status::Ok();
  }

  fs::path path_of(const std::string& file) const { return cache_.snapshot_dir(commit_) / file; }
  int num_downloaded() const { return num_downloaded_; }

 private:
  Status fetch_one(const std::string& file) {
    std::error_code ec;
    if (fs::exists(path_of(file), ec)) return Status::Ok();  // follows the symlink
    PAGODA_ASSIGN_OR_RETURN(HubFileMetadata meta, client_.file_metadata(repo_id_, commit_, file));
    const fs::path blob = cache_.blob_path(meta.etag);
    PAGODA_ASSIGN_OR_RETURN(FileLock lock, FileLock::acquire(cache_.lock_path(meta.etag)));
    if (!fs::exists(blob, ec)) {
      PAGODA_RETURN_IF_ERROR(client_.download_blob(repo_id_, meta, blob));
      ++num_downloaded_;
    }
    return cache_.link_snapshot_file(commit_, file, meta.etag);
  }

  HubClient& client_;
  const HubRepoCache& cache_;
  std::string repo_id_, commit_;
  int num_downloaded_ = 0;
};

Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, fmt::format("cannot read {}", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<HubModelFiles> fetch_gguf(SnapshotFetcher& fetcher, const RepoModelSpec& spec,
                                 const std::vector<std::string>& files) {
  const std::string quant = spec.quant.value_or(kDefaultGgufQuant);
  auto picked = pick_gguf_file(files, quant);
  if (!picked.ok()) {
    return make_error(picked.error().code,
                      fmt::format("repo '{}': {}", spec.repo_id, picked.error().message));
  }
  log_info("model {}: GGUF file {} (quantization {})", spec.repo_id, *picked, quant);
  PAGODA_RETURN_IF_ERROR(fetcher.fetch({*picked}));
  return HubModelFiles{fetcher.path_of(*picked), true};
}

Result<HubModelFiles> fetch_hf_model(SnapshotFetcher& fetcher, const RepoModelSpec& spec,
                                     const std::vector<std::string>& files) {
  PAGODA_RETURN_IF_ERROR(fetcher.fetch(select_metadata_files(files)));
  std::string index;
  if (contains(files, kIndexFile)) {
    PAGODA_RETURN_IF_ERROR(fetcher.fetch({kIndexFile}));
    PAGODA_ASSIGN_OR_RETURN(index, read_text(fetcher.path_of(kIndexFile)));
  }
  auto weights = select_weight_files(files, index);
  if (!weights.ok()) {
    return make_error(weights.error().code,
                      fmt::format("repo '{}': {}", spec.repo_id, weights.error().message));
  }
  PAGODA_RETURN_IF_ERROR(fetcher.fetch(*weights));
  return HubModelFiles{fetcher.path_of("config.json").parent_path(), false};
}

}  // namespace

Result<HubModelFiles> download_from_hub(const RepoModelSpec& spec, const HubOptions& options) {
  HubClient client(options);
  log_info("model {}: looking up revision '{}' on {}", spec.repo_id, options.revision,
           options.endpoint);
  PAGODA_ASSIGN_OR_RETURN(HubRepoInfo info, client.repo_info(spec.repo_id));
  const HubRepoCache cache(options.cache_dir, spec.repo_id);
  PAGODA_RETURN_IF_ERROR(cache.write_ref(options.revision, info.commit));
  SnapshotFetcher fetcher(client, cache, spec.repo_id, info.commit);
  const bool has_config = contains(info.files, "config.json");
  Result<HubModelFiles> out = spec.quant || !has_config ? fetch_gguf(fetcher, spec, info.files)
                                                        : fetch_hf_model(fetcher, spec, info.files);
  if (!out.ok()) return out;
  log_info("model {}: commit {} in {} ({} file{} downloaded)", spec.repo_id, info.commit,
           cache.snapshot_dir(info.commit).string(), fetcher.num_downloaded(),
           fetcher.num_downloaded() == 1 ? "" : "s");
  return out;
}

}  // namespace pagoda
