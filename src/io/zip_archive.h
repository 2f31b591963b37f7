// The entries of a zip archive held in memory, as PyTorch's torch.save
// writes them: every entry stored (compression method 0), its data one
// contiguous byte range of the buffer. Parsed from the end-of-central-
// directory record (zip64 records and extra fields read when present);
// entries with another compression method are listed with `stored` false so
// a reader can refuse the one it needs, naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace pagoda {

struct ZipEntry {
  std::string name;         // path inside the archive, e.g. "archive/data.pkl"
  bool stored = false;      // compression method 0: data_begin..+size are the bytes
  uint16_t method = 0;      // the compression method as written
  uint64_t data_begin = 0;  // absolute offset of the entry's bytes in the buffer
  uint64_t size = 0;        // compressed size (== uncompressed when stored)
};

// Validates and lists the entries of the zip archive in data[0..size): the
// end-of-central-directory record (zip64 when its fields overflow), each
// central header and the local header it points at, every stored entry's
// data inside the buffer. Errors are kCorrupt naming `name` and what is
// wrong (also for an encrypted or multi-disk archive: kUnsupported).
Result<std::vector<ZipEntry>> parse_zip_archive(const uint8_t* data, size_t size,
                                                const std::string& name);

}  // namespace pagoda
