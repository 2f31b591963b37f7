// The Hugging Face hub HTTP API, as huggingface_hub uses it:
//   GET  {endpoint}/api/models/{repo}/revision/{rev}   -> commit ("sha"), files ("siblings")
//   HEAD {endpoint}/{repo}/resolve/{rev}/{file}        -> X-Repo-Commit, ETag / X-Linked-Etag,
//                                                         X-Linked-Size, Location (LFS: a CDN)
//   GET  the HEAD's location, following redirects      -> the file, resumable with Range
// A token goes as "Authorization: Bearer" to the hub, never to a redirect's
// other host.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/hub/http_client.h"
#include "io/hub/hub_options.h"

namespace pagoda {

struct HubRepoInfo {
  std::string commit;              // the revision's full commit id
  std::vector<std::string> files;  // every file of the repo at that commit (relative paths)
};

struct HubFileMetadata {
  std::string file;              // path in the repo
  std::string commit;            // X-Repo-Commit
  std::string etag;              // normalized X-Linked-Etag, else ETag: the blob's name
  std::string location;          // where to GET the content
  bool redirected = false;       // location is a redirect target (send no token there)
  std::optional<uint64_t> size;  // X-Linked-Size, else Content-Length
};

class HubClient {
 public:
  explicit HubClient(HubOptions options);

  // The commit and file list of `repo_id` at options.revision.
  Result<HubRepoInfo> repo_info(const std::string& repo_id);

  // The metadata of one file at `revision` (a commit id, as snapshot
  // downloads ask). Relative redirects (a renamed repo) are followed.
  Result<HubFileMetadata> file_metadata(const std::string& repo_id, const std::string& revision,
                                        const std::string& file);

  // Writes the file's content to `blob`: appended to `blob`.incomplete
  // (resumed from its size with a Range request, retried when the
  // connection drops), checked against the announced size, then renamed.
  // A progress bar or log lines show the bytes.
  Status download_blob(const std::string& repo_id, const HubFileMetadata& meta,
                       const std::filesystem::path& blob);

 private:
  HttpHeaders headers(bool with_token) const;

  HubOptions options_;
  HttpClient http_;
};

}  // namespace pagoda
