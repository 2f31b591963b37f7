// PyTorch zip checkpoint parsing: the archive, the pickle, the storages.
#include "io/torch_checkpoint.h"

#include <fmt/format.h>

#include <map>

#include "io/torch_pickle.h"
#include "io/zip_archive.h"

namespace pagoda {

namespace {

Status require_stored(const ZipEntry& e, const std::string& name) {
  if (e.stored) return Status::Ok();
  return make_error(ErrorCode::kUnsupported,
                    fmt::format("{}: zip entry '{}' is compressed (method {}); torch.save stores "
                                "entries uncompressed, so re-save the checkpoint with torch.save",
                                name, e.name, e.method));
}

// The archive's folder: the one top-level "<prefix>/data.pkl".
Result<std::string> find_prefix(const std::vector<ZipEntry>& entries, const std::string& name) {
  std::string prefix;
  int found = 0;
  for (const ZipEntry& e : entries) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.substr(slash) == "/data.pkl") {
      prefix = e.name.substr(0, slash);
      ++found;
    }
  }
  if (found == 1) return prefix;
  return make_error(ErrorCode::kUnsupported,
                    fmt::format("{}: {} top-level '<folder>/data.pkl' entries; a PyTorch zip "
                                "checkpoint (torch.save since 1.6) has one (the legacy tar / raw "
                                "pickle format is not supported)",
                                name, found));
}

Status check_byteorder(const uint8_t* data, const std::map<std::string, const ZipEntry*>& by_name,
                       const std::string& prefix, const std::string& name) {
  auto it = by_name.find(prefix + "/byteorder");
  if (it == by_name.end()) return Status::Ok();  // older writers: little-endian
  PAGODA_RETURN_IF_ERROR(require_stored(*it->second, name));
  const std::string order(reinterpret_cast<const char*>(data + it->second->data_begin),
                          it->second->size);
  if (order == "little") return Status::Ok();
  return make_error(
      ErrorCode::kUnsupported,
      fmt::format("{}: byteorder is '{}'; only little-endian checkpoints are read", name, order));
}

// Row-major contiguous (size-1 dimensions may carry any stride), elements
// inside the storage; returns the element count.
Result<int64_t> check_view(const TorchTensorRecord& r, const std::string& name) {
  const std::string where = fmt::format("{}: tensor '{}'", name, r.name);
  if (r.storage_offset < 0 || r.storage_offset > r.storage_numel) {
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("{} has storage offset {} outside its {} elements", where,
                                  r.storage_offset, r.storage_numel));
  }
  const int64_t room = r.storage_numel - r.storage_offset;
  int64_t numel = 1;
  for (int64_t d : r.shape) {
    if (d < 0) return make_error(ErrorCode::kCorrupt, fmt::format("{} has a negative size", where));
    if (d == 0) return int64_t{0};
    if (numel > room / d) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{} needs more than the {} elements its storage has past "
                                    "offset {}",
                                    where, room, r.storage_offset));
    }
    numel *= d;
  }
  int64_t expected = 1;
  for (size_t k = r.shape.size(); k-- > 0;) {
    if (r.shape[k] != 1 && r.stride[k] != expected) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{} is not contiguous (size {} stride {} at dimension {}, "
                                    "expected stride {}); save it with .contiguous()",
                                    where, r.shape[k], r.stride[k], k, expected));
    }
    expected *= r.shape[k];
  }
  return numel;
}

}  // namespace

Result<std::vector<TorchCheckpointTensor>> parse_torch_checkpoint(const uint8_t* data, size_t size,
                                                                  const std::string& name) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<ZipEntry> entries, parse_zip_archive(data, size, name));
  PAGODA_ASSIGN_OR_RETURN(std::string prefix, find_prefix(entries, name));
  std::map<std::string, const ZipEntry*> by_name;
  for (const ZipEntry& e : entries) by_name[e.name] = &e;
  PAGODA_RETURN_IF_ERROR(check_byteorder(data, by_name, prefix, name));
  const ZipEntry& pkl = *by_name.at(prefix + "/data.pkl");
  PAGODA_RETURN_IF_ERROR(require_stored(pkl, name));
  PAGODA_ASSIGN_OR_RETURN(std::vector<TorchTensorRecord> records,
                          parse_torch_pickle(data + pkl.data_begin, pkl.size, name));
  std::vector<TorchCheckpointTensor> out;
  for (const TorchTensorRecord& r : records) {
    auto it = by_name.find(prefix + "/data/" + r.storage_key);
    if (it == by_name.end()) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{}: tensor '{}' names storage '{}', which the archive lacks",
                                    name, r.name, r.storage_key));
    }
    const ZipEntry& storage = *it->second;
    PAGODA_RETURN_IF_ERROR(require_stored(storage, name));
    const uint64_t elem = dtype_size(r.dtype);
    // Compared by division: numel * elem may overflow 64 bits.
    if (storage.size % elem != 0 || storage.size / elem != static_cast<uint64_t>(r.storage_numel)) {
      return make_error(
          ErrorCode::kCorrupt,
          fmt::format("{}: storage '{}' of tensor '{}' holds {} bytes, not {} {}s", name,
                      storage.name, r.name, storage.size, r.storage_numel, r.storage_type));
    }
    PAGODA_ASSIGN_OR_RETURN(int64_t numel, check_view(r, name));
    const uint64_t begin = storage.data_begin + static_cast<uint64_t>(r.storage_offset) * elem;
    out.push_back(TorchCheckpointTensor{r.name, r.dtype, r.shape, begin,
                                        begin + static_cast<uint64_t>(numel) * elem});
  }
  return out;
}

}  // namespace pagoda
