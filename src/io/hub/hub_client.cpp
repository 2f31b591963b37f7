#include "io/hub/hub_client.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/log.h"
#include "core/progress.h"
#include "core/units.h"
#include "io/hub/hub_cache.h"
#include "io/hub/hub_errors.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;

// Attempts of one blob download; each after the first resumes where the
// previous one stopped.
constexpr int kDownloadAttempts = 5;
constexpr int kMaxRelativeRedirects = 5;

bool is_success(long status) {
  return status >= 200 && status < 300;
}
bool is_redirect(long status) {
  return status >= 300 && status < 400;
}

std::optional<uint64_t> parse_size(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(s);
}

// "scheme://host[:port]" of an absolute URL.
std::string origin_of(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return {};
  const size_t path = url.find('/', scheme + 3);
  return url.substr(0, path);
}

// "812 B", "11.9 KiB", "1.0 MiB", "2.31 GiB".
std::string human_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1u << 20)) return fmt::format("{:.1f} KiB", b / 1024);
  if (bytes < (1u << 30)) return fmt::format("{:.1f} MiB", b / (1 << 20));
  return fmt::format("{:.2f} GiB", to_gib(b));
}

uint64_t file_size_or_zero(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

}  // namespace

HubClient::HubClient(HubOptions options) : options_(std::move(options)) {}

HttpHeaders HubClient::headers(bool with_token) const {
  HttpHeaders h = {"Accept-Encoding: identity"};
  if (with_token && !options_.token.empty()) h.push_back("Authorization: Bearer " + options_.token);
  return h;
}

Result<HubRepoInfo> HubClient::repo_info(const std::string& repo_id) {
  const HubRequestContext what{repo_id, options_.revision, "", !options_.token.empty()};
  const std::string url = fmt::format("{}/api/models/{}/revision/{}", options_.endpoint, repo_id,
                                      url_quote(options_.revision, ""));
  auto r = http_.request("GET", url, headers(true), true);
  if (!r.ok()) return hub_network_error(r.error(), what);
  if (!is_success(r->status)) return hub_http_error(*r, what);
  const auto body = nlohmann::json::parse(r->body, nullptr, false);
  if (body.is_discarded() || !body.is_object() || !body.contains("sha") ||
      !body["sha"].is_string()) {
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("{} did not answer with the repo's commit ('sha')", url));
  }
  HubRepoInfo info;
  info.commit = body["sha"].get<std::string>();
  for (const auto& s : body.value("siblings", nlohmann::json::array())) {
    if (s.is_object() && s.contains("rfilename") && s["rfilename"].is_string())
      info.files.push_back(s["rfilename"].get<std::string>());
  }
  return info;
}

Result<HubFileMetadata> HubClient::file_metadata(const std::string& repo_id,
                                                 const std::string& revision,
                                                 const std::string& file) {
  const HubRequestContext what{repo_id, revision, file, !options_.token.empty()};
  std::string url = fmt::format("{}/{}/resolve/{}/{}", options_.endpoint, repo_id,
                                url_quote(revision, ""), url_quote(file, "/"));
  for (int hop = 0;; ++hop) {
    auto r = http_.request("HEAD", url, headers(true), false);
    if (!r.ok()) return hub_network_error(r.error(), what);
    const std::string location = r->header("location");
    if (is_redirect(r->status) && !location.empty() && location.front() == '/' &&
        hop < kMaxRelativeRedirects) {
      url = origin_of(url) + location;  // a renamed repo: same host
      continue;
    }
    if (!is_success(r->status) && !is_redirect(r->status)) return hub_http_error(*r, what);
    HubFileMetadata meta;
    meta.file = file;
    meta.commit = r->header("x-repo-commit");
    std::string etag = r->header("x-linked-etag");
    if (etag.empty()) etag = r->header("etag");
    meta.etag = normalize_etag(etag);
    meta.redirected = is_redirect(r->status) && !location.empty();
    meta.location = meta.redirected ? location : url;
    meta.size = parse_size(r->header("x-linked-size"));
    if (!meta.size) meta.size = parse_size(r->header("content-length"));
    if (meta.commit.empty()) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{} sent no X-Repo-Commit header: is {} a Hugging Face hub?",
                                    url, options_.endpoint));
    }
    if (meta.etag.empty() || meta.etag.find('/') != std::string::npos || meta.etag == "." ||
        meta.etag == "..") {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{} sent no usable ETag ('{}')", url, etag));
    }
    return meta;
  }
}

Status HubClient::download_blob(const std::string& repo_id, const HubFileMetadata& meta,
                                const fs::path& blob) {
  const HubRequestContext what{repo_id, meta.commit, meta.file, !options_.token.empty()};
  const fs::path partial = blob.string() + ".incomplete";
  std::error_code ec;
  fs::create_directories(blob.parent_path(), ec);
  std::FILE* out = std::fopen(partial.c_str(), "ab");
  if (out == nullptr) {
    return make_error(ErrorCode::kIo, fmt::format("cannot write {}", partial.string()));
  }
  uint64_t have = file_size_or_zero(partial);
  if (have > 0) log_info("resuming {} at {}", meta.file, human_bytes(have));
  Progress progress("download " + meta.file, meta.size.value_or(0), options_.show_progress);
  const std::string total = meta.size ? human_bytes(*meta.size) : "?";
  auto on_bytes = [&](uint64_t n) {
    progress.update(n, fmt::format("{} of {}", human_bytes(n), total));
  };
  Status status = Status::Ok();
  for (int attempt = 1; attempt <= kDownloadAttempts; ++attempt) {
    if (meta.size && have == *meta.size) break;  // all there from an earlier run
    uint64_t start = have;
    auto r = http_.download(meta.location, headers(!meta.redirected), have, out, &start, on_bytes);
    have = file_size_or_zero(partial);
    if (r.ok() && r->status == 416) {  // the range is past the end
      if (meta.size && have == *meta.size) break;
      if (ftruncate(fileno(out), 0) != 0) break;  // start over
      have = 0;
      continue;
    }
    if (r.ok() && !is_success(r->status)) {
      status = hub_http_error(*r, what);
      break;
    }
    if (r.ok()) {
      status = Status::Ok();
      break;
    }
    status =
        make_error(ErrorCode::kIo,
                   fmt::format("download of '{}' stopped at {} of {} after {} attempts ({}); run "
                               "again to resume it from {}",
                               meta.file, human_bytes(have), total, attempt, r.error().message,
                               partial.string()));
    if (attempt < kDownloadAttempts) {
      log_warn("download of {} stopped at {} ({}); retrying from there", meta.file,
               human_bytes(have), r.error().message);
      std::this_thread::sleep_for(std::chrono::milliseconds(250 * attempt));
    }
  }
  std::fclose(out);
  if (!status.ok()) return status;
  progress.finish();
  if (meta.size && have != *meta.size) {
    fs::remove(partial, ec);
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("download of '{}' from {} has {} bytes, the hub announced {}; "
                                  "removed it, run again to retry",
                                  meta.file, meta.location, have, *meta.size));
  }
  fs::rename(partial, blob, ec);
  if (ec) {
    return make_error(ErrorCode::kIo, fmt::format("cannot rename {} to {}: {}", partial.string(),
                                                  blob.string(), ec.message()));
  }
  return Status::Ok();
}

}  // namespace pagoda
