// Model spec resolution: a folder, a .gguf file, or a repo id in the Hugging
// Face cache (downloaded into it when allowed).
#include "io/model_location.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "io/hub/gguf_pick.h"
#include "io/hub/hub_cache.h"
#include "io/hub/hub_download.h"
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

// The names of a snapshot's .gguf files, relative to it.
std::vector<std::string> gguf_names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::path& p : gguf_files_in(dir)) names.push_back(p.filename().string());
  return names;
}

// The model in a cached snapshot: the .gguf of the quant tag, else the
// Hugging Face model (config.json), else its only .gguf or, among several,
// the default quantization's.
Result<ModelLocation> location_in_snapshot(const fs::path& snap, const RepoModelSpec& spec,
                                           const std::string& display_name) {
  const std::vector<std::string> ggufs = gguf_names_in(snap);
  if (!spec.quant && (is_file(snap / "config.json") || ggufs.size() <= 1))
    return location_in_folder(snap, display_name);
  auto picked = pick_gguf_file(ggufs, spec.quant.value_or(kDefaultGgufQuant));
  if (!picked.ok()) {
    std::string hint = spec.quant ? "" : "; name one as " + spec.repo_id + ":QUANT";
    return make_error(picked.error().code, fmt::format("snapshot {}: {}{}", snap.string(),
                                                       picked.error().message, hint));
  }
  return ModelLocation{ModelFormat::kGguf, (snap / *picked).string(), display_name};
}

// Whether every shard the index `index_name` in `snap` names is there;
// nullopt when there is no such index.
std::optional<bool> index_complete(const fs::path& snap, const char* index_name) {
  auto index = read_file_text((snap / index_name).string());
  if (!index.ok()) return std::nullopt;
  const auto j = nlohmann::json::parse(*index, nullptr, false);
  if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object()) return false;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string() || !is_file(snap / file.get<std::string>())) return false;
  }
  return true;
}

// Whether a Hugging Face snapshot holds its weights: every shard of
// model.safetensors.index.json, else some .safetensors file, else (PyTorch
// checkpoints, io/hub/model_files_select.h) every shard of
// pytorch_model.bin.index.json, else pytorch_model.bin. A download fetches
// weights last, so this also vouches for the smaller files.
bool has_all_weights(const fs::path& snap) {
  if (auto complete = index_complete(snap, "model.safetensors.index.json")) return *complete;
  std::error_code ec;
  for (fs::directory_iterator it(snap, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".safetensors" && is_file(it->path())) return true;
  }
  if (auto complete = index_complete(snap, "pytorch_model.bin.index.json")) return *complete;
  return is_file(snap / "pytorch_model.bin");
}

bool env_is_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// Where an offline lookup failed, and how to download instead.
Error not_found_offline(const std::string& spec, const std::vector<std::string>& searched,
                        const HubOptions& hub) {
  std::string places;
  for (const std::string& s : searched) places += "\n  " + s;
  std::string hint;
  if (env_is_set("HF_HUB_OFFLINE") || env_is_set("TRANSFORMERS_OFFLINE")) {
    hint = fmt::format(
        "\nHF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is set: unset it to download the "
        "model from {}",
        hub.endpoint);
  }
  return make_error(
      ErrorCode::kNotFound,
      fmt::format("model '{}' not found (offline; searched:{}){}", spec, places, hint));
}

}  // namespace

Result<ModelLocation> resolve_model(std::string_view spec_view, const HubOptions& hub) {
  const std::string spec(spec_view);
  const fs::path path(spec);
  if (hub.revision_given && (is_dir(path) || is_file(path))) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--revision {} names a revision of a Hugging Face repo, but "
                                  "MODEL '{}' is a local path, which has none: drop --revision "
                                  "or give a repo id",
                                  hub.revision, spec));
  }
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
  const std::optional<RepoModelSpec> repo = parse_repo_model_spec(spec);
  if (!repo) return not_found_offline(spec, searched, hub);
  const HubRepoCache cache(hub.cache_dir.empty() ? hf_hub_cache_dir() : hub.cache_dir,
                           repo->repo_id);
  searched.push_back(cache.dir().string());
  if (auto commit = cache.cached_commit(hub.revision)) {
    auto loc = location_in_snapshot(cache.snapshot_dir(*commit), *repo, spec);
    const bool complete =
        loc.ok() && (loc->format == ModelFormat::kGguf || has_all_weights(loc->path));
    if (hub.offline || complete) {
      if (loc.ok()) return loc;
      return make_error(loc.error().code, fmt::format("model '{}' in the Hugging Face cache: {}",
                                                      spec, loc.error().message));
    }
  }
  if (hub.offline) return not_found_offline(spec, searched, hub);
  HubOptions download = hub;
  if (download.cache_dir.empty()) download.cache_dir = hf_hub_cache_dir();
  PAGODA_ASSIGN_OR_RETURN(HubModelFiles files, download_from_hub(*repo, download));
  if (files.is_gguf) return ModelLocation{ModelFormat::kGguf, files.path.string(), spec};
  return location_in_folder(files.path, spec);
}

}  // namespace pagoda
