#include "io/hub/hub_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace pagoda {

namespace {

namespace fs = std::filesystem;

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

std::optional<std::string> read_ref(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }),
          s.end());
  if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..") return std::nullopt;
  return s;
}

std::optional<std::string> newest_snapshot(const fs::path& snapshots) {
  std::optional<fs::path> best;
  fs::file_time_type best_time{};
  std::error_code ec;
  for (fs::directory_iterator it(snapshots, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_dir(it->path())) continue;
    std::error_code tec;
    const auto t = fs::last_write_time(it->path(), tec);
    if (tec) continue;
    if (!best || t > best_time) {
      best = it->path();
      best_time = t;
    }
  }
  if (!best) return std::nullopt;
  return best->filename().string();
}

}  // namespace

std::string hub_repo_folder_name(const std::string& repo_id) {
  std::string out = "models--";
  for (char c : repo_id) out += c == '/' ? std::string("--") : std::string(1, c);
  return out;
}

bool is_commit_hash(const std::string& revision) {
  return revision.size() == 40 && std::all_of(revision.begin(), revision.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string normalize_etag(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag.erase(0, 2);
  while (!etag.empty() && etag.front() == '"') etag.erase(0, 1);
  while (!etag.empty() && etag.back() == '"') etag.pop_back();
  return etag;
}

HubRepoCache::HubRepoCache(const fs::path& cache_root, const std::string& repo_id)
    : dir_(cache_root / hub_repo_folder_name(repo_id)),
      lock_dir_(cache_root / ".locks" / hub_repo_folder_name(repo_id)) {}

std::optional<std::string> HubRepoCache::cached_commit(const std::string& revision) const {
  if (is_commit_hash(revision) && is_dir(snapshot_dir(revision))) return revision;
  if (auto ref = read_ref(dir_ / "refs" / revision); ref && is_dir(snapshot_dir(*ref))) return ref;
  if (revision == "main") return newest_snapshot(dir_ / "snapshots");
  return std::nullopt;
}

Status HubRepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (revision == commit) return Status::Ok();
  const fs::path ref = dir_ / "refs" / revision;
  if (read_ref(ref) == commit) return Status::Ok();
  std::error_code ec;
  fs::create_directories(ref.parent_path(), ec);
  const fs::path tmp = ref.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;
    if (!out) return make_error(ErrorCode::kIo, fmt::format("cannot write {}", tmp.string()));
  }
  fs::rename(tmp, ref, ec);
  if (ec)
    return make_error(ErrorCode::kIo,
                      fmt::format("cannot write {}: {}", ref.string(), ec.message()));
  return Status::Ok();
}

Status HubRepoCache::link_snapshot_file(const std::string& commit, const std::string& file,
                                        const std::string& etag) const {
  const fs::path link = snapshot_dir(commit) / file;
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) {
    return make_error(ErrorCode::kIo, fmt::format("cannot create {}: {}",
                                                  link.parent_path().string(), ec.message()));
  }
  const fs::path target = blob_path(etag).lexically_relative(link.parent_path());
  fs::remove(link, ec);
  fs::create_symlink(target, link, ec);
  if (ec) {
    return make_error(ErrorCode::kIo, fmt::format("cannot link {} -> {}: {}", link.string(),
                                                  target.string(), ec.message()));
  }
  return Status::Ok();
}

}  // namespace pagoda
