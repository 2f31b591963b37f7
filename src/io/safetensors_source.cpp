// WeightSource over memory-mapped safetensors files.
#include <fmt/format.h>

#include "core/log.h"
#include "io/mapped_files_source.h"
#include "io/safetensors.h"

namespace pagoda {

namespace {

class SafetensorsSource final : public MappedFilesSource {
 public:
  SafetensorsSource() : MappedFilesSource("safetensors") {}

  Status add_file(const std::string& path) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, MappedFile::open(path));
    PAGODA_ASSIGN_OR_RETURN(SafetensorsHeader header,
                            parse_safetensors_header(map->data(), map->size(), path));
    for (SafetensorsEntry& e : header.tensors) {
      if (!e.dtype) {
        return make_error(
            ErrorCode::kUnsupported,
            fmt::format(
                "safetensors {}: tensor '{}' has dtype {}; only F32, F16, BF16 and "
                "I32 (AWQ / GPTQ packed weights), F8_E4M3 (FP8 linear weights), I64 and BOOL "
                "(EAGLE-3's d2t / t2d maps) are supported",
                path, e.name, e.dtype_name));
      }
      PAGODA_RETURN_IF_ERROR(
          add_located(TensorInfo{e.name, *e.dtype, e.shape, e.end - e.begin, std::nullopt}, e.begin,
                      e.end, path));
    }
    add_mapped_file(std::move(map));
    return Status::Ok();
  }
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
  return open_checkpoint_folder(folder, "model.safetensors.index.json", "model.safetensors",
                                open_safetensors_files);
}

}  // namespace pagoda
