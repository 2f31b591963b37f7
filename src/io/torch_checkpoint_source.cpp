// WeightSource over memory-mapped PyTorch zip checkpoints.
#include <fmt/format.h>

#include <filesystem>

#include "core/log.h"
#include "io/mapped_file.h"
#include "io/shard_index.h"
#include "io/torch_checkpoint.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;

struct Located {
  size_t file;  // index into files_
  uint64_t begin;
  uint64_t end;
};

class TorchCheckpointSource final : public IndexedWeightSource {
 public:
  Status add_file(const std::string& path) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, MappedFile::open(path));
    PAGODA_ASSIGN_OR_RETURN(std::vector<TorchCheckpointTensor> found,
                            parse_torch_checkpoint(map->data(), map->size(), path));
    for (TorchCheckpointTensor& t : found) {
      if (const std::optional<size_t> at = position(t.name)) {
        return make_error(ErrorCode::kCorrupt,
                          fmt::format("tensor '{}' appears twice, in {} and {}", t.name,
                                      files_[located_[*at].file]->path(), path));
      }
      add_tensor(TensorInfo{t.name, t.dtype, std::move(t.shape), t.end - t.begin, std::nullopt});
      located_.push_back(Located{files_.size(), t.begin, t.end});
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
    const uint8_t* p = files_[loc.file]->data() + loc.begin;
    if (reinterpret_cast<uintptr_t>(p) % dtype_size(info.dtype) == 0) {
      t.data = p;
    } else {  // misaligned for its element type: copy so callers may cast
      t.owned.assign(p, p + (loc.end - loc.begin));
      t.data = t.owned.data();
    }
    return t;
  }

  std::string describe() const override {
    const double gb = static_cast<double>(total_bytes_) / 1e9;
    if (files_.size() == 1)
      return fmt::format("{} ({} tensors, {:.2f} GB)", files_[0]->path(), tensors().size(), gb);
    return fmt::format("{} PyTorch checkpoint shards ({} tensors, {:.2f} GB)", files_.size(),
                       tensors().size(), gb);
  }

 private:
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<Located> located_;  // parallel to tensors()
  uint64_t total_bytes_ = 0;
};

}  // namespace

Result<std::unique_ptr<WeightSource>> open_torch_checkpoint_files(
    const std::vector<std::string>& paths) {
  auto source = std::make_unique<TorchCheckpointSource>();
  for (const std::string& p : paths) PAGODA_RETURN_IF_ERROR(source->add_file(p));
  log_info("opened {}", source->describe());
  return std::unique_ptr<WeightSource>(std::move(source));
}

Result<std::unique_ptr<WeightSource>> open_torch_checkpoint_folder(const std::string& folder) {
  const fs::path dir(folder);
  const fs::path index_path = dir / "pytorch_model.bin.index.json";
  const fs::path single_path = dir / "pytorch_model.bin";
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    PAGODA_ASSIGN_OR_RETURN(ShardIndex index, read_shard_index(index_path.string()));
    std::vector<std::string> paths;
    for (const std::string& s : index.shards) paths.push_back((dir / s).string());
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source,
                            open_torch_checkpoint_files(paths));
    PAGODA_RETURN_IF_ERROR(check_shard_index(index, *source, index_path.string()));
    return source;
  }
  if (fs::exists(single_path, ec)) return open_torch_checkpoint_files({single_path.string()});
  return make_error(ErrorCode::kNotFound,
                    fmt::format("no weights in {}: expected pytorch_model.bin or "
                                "pytorch_model.bin.index.json",
                                folder));
}

}  // namespace pagoda
