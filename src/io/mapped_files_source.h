// A WeightSource over memory-mapped checkpoint files whose tensors are byte
// ranges of the files as stored (safetensors, PyTorch zip checkpoints): the
// format's reader lists each file's tensors with their ranges, this class
// keeps the maps, refuses a name seen twice and hands out views (copies only
// where a view would be misaligned for its element type).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "io/mapped_file.h"
#include "io/weight_source.h"

namespace pagoda {

class MappedFilesSource : public IndexedWeightSource {
 public:
  // `format` names the files in describe() ("safetensors", "PyTorch checkpoint").
  explicit MappedFilesSource(std::string format) : format_(std::move(format)) {}

  Result<HostTensor> read(std::string_view name) override;
  // "<path> (N tensors, G GB)" for one file, "<n> <format> shards (...)" for more.
  std::string describe() const override;

 protected:
  // Lists `info` at bytes [begin, end) of the file being added (the next
  // add_mapped_file's); kCorrupt naming both files when the name is listed.
  Status add_located(TensorInfo info, uint64_t begin, uint64_t end, const std::string& path);
  // Keeps the map of the file whose tensors were just listed.
  void add_mapped_file(std::unique_ptr<MappedFile> map);

 private:
  struct Located {
    size_t file;  // index into files_
    uint64_t begin;
    uint64_t end;
  };
  std::string format_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<Located> located_;  // parallel to tensors()
  uint64_t total_bytes_ = 0;
};

using OpenCheckpointFiles =
    std::function<Result<std::unique_ptr<WeightSource>>(const std::vector<std::string>&)>;

// Opens `folder`'s checkpoint with `open_files`: the shards that
// `index_name` (a Hugging Face shard index, shard_index.h) lists, checked
// against it, else the single file `single_name`; kNotFound naming both
// when neither exists.
Result<std::unique_ptr<WeightSource>> open_checkpoint_folder(const std::string& folder,
                                                             const std::string& index_name,
                                                             const std::string& single_name,
                                                             const OpenCheckpointFiles& open_files);

}  // namespace pagoda
