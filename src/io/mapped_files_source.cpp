#include "io/mapped_files_source.h"

#include <fmt/format.h>

#include <filesystem>

#include "io/shard_index.h"

namespace pagoda {

namespace fs = std::filesystem;

Status MappedFilesSource::add_located(TensorInfo info, uint64_t begin, uint64_t end,
                                      const std::string& path) {
  if (const std::optional<size_t> at = position(info.name)) {
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("tensor '{}' appears in both {} and {}", info.name,
                                  files_[located_[*at].file]->path(), path));
  }
  add_tensor(std::move(info));
  located_.push_back(Located{files_.size(), begin, end});
  return Status::Ok();
}

void MappedFilesSource::add_mapped_file(std::unique_ptr<MappedFile> map) {
  total_bytes_ += map->size();
  files_.push_back(std::move(map));
}

Result<HostTensor> MappedFilesSource::read(std::string_view name) {
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

std::string MappedFilesSource::describe() const {
  const double gb = static_cast<double>(total_bytes_) / 1e9;
  if (files_.size() == 1)
    return fmt::format("{} ({} tensors, {:.2f} GB)", files_[0]->path(), tensors().size(), gb);
  return fmt::format("{} {} shards ({} tensors, {:.2f} GB)", files_.size(), format_,
                     tensors().size(), gb);
}

Result<std::unique_ptr<WeightSource>> open_checkpoint_folder(
    const std::string& folder, const std::string& index_name, const std::string& single_name,
    const OpenCheckpointFiles& open_files) {
  const fs::path dir(folder);
  const fs::path index_path = dir / index_name;
  const fs::path single_path = dir / single_name;
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    PAGODA_ASSIGN_OR_RETURN(ShardIndex index, read_shard_index(index_path.string()));
    std::vector<std::string> paths;
    for (const std::string& s : index.shards) paths.push_back((dir / s).string());
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source, open_files(paths));
    PAGODA_RETURN_IF_ERROR(check_shard_index(index, *source, index_path.string()));
    return source;
  }
  if (fs::exists(single_path, ec)) return open_files({single_path.string()});
  return make_error(ErrorCode::kNotFound, fmt::format("no weights in {}: expected {} or {}", folder,
                                                      single_name, index_name));
}

}  // namespace pagoda
