// The Hugging Face hub cache layout, shared with huggingface_hub (and so with
// transformers and vLLM):
//   <cache_root>/models--<org>--<name>/
//     blobs/<etag>                 file contents, named by the normalized ETag
//                                  (git sha1, or sha256 for LFS files)
//     blobs/<etag>.incomplete      a download in progress (resumable)
//     snapshots/<commit>/<file>    relative symlink to ../../blobs/<etag>
//     refs/<revision>              the commit of a branch or tag, no newline
//   <cache_root>/.locks/models--<org>--<name>/<etag>.lock   download locks
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "core/result.h"

namespace pagoda {

class HubRepoCache {
 public:
  // repo_id "org/name" (or "name").
  HubRepoCache(const std::filesystem::path& cache_root, const std::string& repo_id);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path blob_path(const std::string& etag) const { return dir_ / "blobs" / etag; }
  std::filesystem::path snapshot_dir(const std::string& commit) const {
    return dir_ / "snapshots" / commit;
  }
  // <cache_root>/.locks/models--org--name/<etag>.lock, as huggingface_hub.
  std::filesystem::path lock_path(const std::string& etag) const {
    return lock_dir_ / (etag + ".lock");
  }

  // The cached commit of `revision`: the revision itself when it is a
  // 40-hex commit with a snapshot, else the content of refs/<revision>.
  // For "main" without a ref, the most recently modified snapshot (caches
  // filled by hand or by older tools). nullopt when nothing matches.
  std::optional<std::string> cached_commit(const std::string& revision) const;

  // Writes refs/<revision> = commit (atomically, without a newline) unless
  // the revision is the commit itself or the ref already says so.
  Status write_ref(const std::string& revision, const std::string& commit) const;

  // Makes snapshots/<commit>/<file> a relative symlink to blobs/<etag>,
  // replacing what was there. `file` may contain '/' (subfolders).
  Status link_snapshot_file(const std::string& commit, const std::string& file,
                            const std::string& etag) const;

 private:
  std::filesystem::path dir_, lock_dir_;
};

// "org/name" -> "models--org--name" (huggingface_hub's repo_folder_name).
std::string hub_repo_folder_name(const std::string& repo_id);

// A 40-character lowercase hex string: a full git commit id.
bool is_commit_hash(const std::string& revision);

// huggingface_hub's ETag normalization: drop a weak "W/" prefix and quotes.
std::string normalize_etag(std::string etag);

}  // namespace pagoda
