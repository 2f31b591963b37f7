// Model spec resolution: a folder, a .gguf file, or a repo id in the offline
// Hugging Face cache.
#include "io/model_location.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "io/mapped_file.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool has_gguf_extension(const fs::path& p) {
  return p.extension() == ".gguf";
}

std::vector<fs::path> gguf_files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (has_gguf_extension(it->path()) && is_file(it->path())) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A folder → HF model (config.json) or its only .gguf file.
Result<ModelLocation> location_in_folder(const fs::path& dir, const std::string& display_name) {
  if (is_file(dir / "config.json"))
    return ModelLocation{ModelFormat::kHuggingFace, dir.string(), display_name};
  const std::vector<fs::path> ggufs = gguf_files_in(dir);
  if (ggufs.size() == 1) return ModelLocation{ModelFormat::kGguf, ggufs[0].string(), display_name};
  if (ggufs.empty()) {
    return make_error(
        ErrorCode::kNotFound,
        fmt::format("folder {} has neither config.json nor a .gguf file", dir.string()));
  }
  std::string names;
  for (const fs::path& p : ggufs) names += (names.empty() ? "" : ", ") + p.filename().string();
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("folder {} has several .gguf files ({}); pass one file's path",
                                dir.string(), names));
}

// A repo id "Org/Name" (or "Name"): one or two non-empty components without
// dots-only names.
bool looks_like_repo_id(std::string_view spec) {
  if (spec.empty() || spec.front() == '/' || spec.back() == '/') return false;
  const size_t slash = spec.find('/');
  if (slash != std::string_view::npos && spec.find('/', slash + 1) != std::string_view::npos)
    return false;
  for (std::string_view part :
       {spec.substr(0, slash), slash == std::string_view::npos ? "x" : spec.substr(slash + 1)}) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

// snapshots/<rev> from refs/main, else the most recently modified snapshot.
std::optional<fs::path> pick_snapshot(const fs::path& repo_dir) {
  const fs::path snapshots = repo_dir / "snapshots";
  if (auto ref = read_file_text((repo_dir / "refs" / "main").string()); ref.ok()) {
    std::string rev = *ref;
    rev.erase(std::remove_if(rev.begin(), rev.end(),
                             [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
              rev.end());
    if (!rev.empty() && rev.find('/') == std::string::npos && is_dir(snapshots / rev))
      return snapshots / rev;
  }
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
  return best;
}

std::string replace_all(std::string s, char from, const std::string& to) {
  std::string out;
  for (char c : s) out += c == from ? to : std::string(1, c);
  return out;
}

}  // namespace

Result<ModelLocation> resolve_model(std::string_view spec_view) {
  const std::string spec(spec_view);
  const fs::path path(spec);
  if (is_dir(path)) {
    const fs::path clean = path.lexically_normal();
    const std::string name =
        (clean.has_filename() ? clean : clean.parent_path()).filename().string();
    return location_in_folder(path, name);
  }
  if (is_file(path)) {
    if (!has_gguf_extension(path) && path.filename() == "config.json") {
      return location_in_folder(path.parent_path().empty() ? fs::path(".") : path.parent_path(),
                                path.parent_path().filename().string());
    }
    return ModelLocation{ModelFormat::kGguf, spec, path.stem().string()};
  }
  std::vector<std::string> searched = {spec + " (as a path)"};
  if (looks_like_repo_id(spec)) {
    const fs::path repo_dir =
        fs::path(hf_hub_cache_dir()) / ("models--" + replace_all(spec, '/', "--"));
    searched.push_back(repo_dir.string());
    if (auto snapshot = pick_snapshot(repo_dir)) {
      auto loc = location_in_folder(*snapshot, spec);
      if (loc.ok()) return loc;
      return make_error(loc.error().code, fmt::format("model '{}' in the Hugging Face cache: {}",
                                                      spec, loc.error().message));
    }
  }
  std::string places;
  for (const std::string& s : searched) places += "\n  " + s;
  return make_error(ErrorCode::kNotFound,
                    fmt::format("model '{}' not found (offline; searched:{})", spec, places));
}

}  // namespace pagoda
