// WeightSource over memory-mapped PyTorch zip checkpoints.
#include "core/log.h"
#include "io/mapped_files_source.h"
#include "io/torch_checkpoint.h"

namespace pagoda {

namespace {

class TorchCheckpointSource final : public MappedFilesSource {
 public:
  TorchCheckpointSource() : MappedFilesSource("PyTorch checkpoint") {}

  Status add_file(const std::string& path) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, MappedFile::open(path));
    PAGODA_ASSIGN_OR_RETURN(std::vector<TorchCheckpointTensor> found,
                            parse_torch_checkpoint(map->data(), map->size(), path));
    for (TorchCheckpointTensor& t : found) {
      PAGODA_RETURN_IF_ERROR(add_located(
          TensorInfo{t.name, t.dtype, std::move(t.shape), t.end - t.begin, std::nullopt}, t.begin,
          t.end, path));
    }
    add_mapped_file(std::move(map));
    return Status::Ok();
  }
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
  return open_checkpoint_folder(folder, "pytorch_model.bin.index.json", "pytorch_model.bin",
                                open_torch_checkpoint_files);
}

}  // namespace pagoda
