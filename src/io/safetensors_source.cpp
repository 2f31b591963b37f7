// WeightSource over memory-mapped safetensors files.
#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "core/log.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/shard_index.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;

struct Located {
  size_t file;  // index into files_
  SafetensorsEntry entry;
};

class SafetensorsSource final : public IndexedWeightSource {
 public:
  Status add_file(const std::string& path) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, MappedFile::open(path));
    PAGODA_ASSIGN_OR_RETURN(SafetensorsHeader header,
                            parse_safetensors_header(map->data(), map->size(), path));
    for (SafetensorsEntry& e : header.tensors) {
      if (!e.dtype) {
        return make_error(
            ErrorCode::kUnsupported,
            fmt::format("safetensors {}: tensor '{}' has dtype {}; only F32, F16, BF16 and "
                        "I32 (AWQ / GPTQ packed weights), F8_E4M3 (FP8 linear weights), I64 and BOOL "
                        "(EAGLE-3's d2t / t2d maps) are supported",
                        path, e.name, e.dtype_name));
      }
      if (const std::optional<size_t> at = position(e.name)) {
        return make_error(ErrorCode::kCorrupt,
                          fmt::format("tensor '{}' appears in both {} and {}", e.name,
                                      files_[located_[*at].file]->path(), path));
      }
      add_tensor(TensorInfo{e.name, *e.dtype, e.shape, e.end - e.begin, std::nullopt});
      located_.push_back(Located{files_.size(), std::move(e)});
    }
    total_bytes_ += map->size();
    files_.push_back(std::move(map));
    return Status::Ok();
  }

  Result<HostTensor> read(std::string_view name) override {
    const std::optional<size_t> at = position(name);
    if (!at) {
      return make_error(ErrorCode::kNotFound,
                        fmt::format("tensor '{}' not found in {}", name, describe()));
    }
    const Located& loc = located_[*at];
    const TensorInfo& info = tensors()[*at];
    HostTensor t;
    t.dtype = info.dtype;
    t.shape = info.shape;
    const uint8_t* p = files_[loc.file]->data() + loc.entry.begin;
    const size_t nbytes = loc.entry.end - loc.entry.begin;
    if (reinterpret_cast<uintptr_t>(p) % dtype_size(info.dtype) == 0) {
      t.data = p;
    } else {  // misaligned for its element type: copy so callers may cast
      t.owned.assign(p, p + nbytes);
      t.data = t.owned.data();
    }
    return t;
  }

  std::string describe() const override {
    const double gb = static_cast<double>(total_bytes_) / 1e9;
    if (files_.size() == 1)
      return fmt::format("{} ({} tensors, {:.2f} GB)", files_[0]->path(), tensors().size(), gb);
    return fmt::format("{} safetensors shards ({} tensors, {:.2f} GB)", files_.size(),
                       tensors().size(), gb);
  }

 private:
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<Located> located_;  // parallel to tensors()
  uint64_t total_bytes_ = 0;
};

}  // namespace

Result<std::unique_ptr<WeightSource>> open_safetensors_files(
    const std::vector<std::string>& paths) {
  auto source = std::make_unique<SafetensorsSource>();
  for (const std::string& p : paths) PAGODA_RETURN_IF_ERROR(source->add_file(p));
  log_info("opened {}", source->describe());
  return std::unique_ptr<WeightSource>(std::move(source));
}

Result<std::unique_ptr<WeightSource>> open_safetensors_folder(const std::string& folder) {
  const fs::path dir(folder);
  const fs::path index_path = dir / "model.safetensors.index.json";
  const fs::path single_path = dir / "model.safetensors";
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    PAGODA_ASSIGN_OR_RETURN(ShardIndex index, read_shard_index(index_path.string()));
    std::vector<std::string> paths;
    for (const std::string& s : index.shards) paths.push_back((dir / s).string());
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source, open_safetensors_files(paths));
    PAGODA_RETURN_IF_ERROR(check_shard_index(index, *source, index_path.string()));
    return source;
  }
  if (fs::exists(single_path, ec)) return open_safetensors_files({single_path.string()});
  return make_error(ErrorCode::kNotFound,
                    fmt::format("no weights in {}: expected model.safetensors or "
                                "model.safetensors.index.json",
                                folder));
}

}  // namespace pagoda
