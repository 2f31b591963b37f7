// safetensors files: header parsing (from a buffer, so it can be fuzzed) and
// a WeightSource over one file or the shards of model.safetensors.index.json,
// returning views into the memory maps (no copy).
//
// File layout: u64 little-endian header length N | N bytes of JSON
//   {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..],
//    "data_offsets": [begin, end]}, ...} | data (offsets relative to 8 + N).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "io/weight_source.h"

namespace pagoda {

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as written: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;  // set for the dtypes a WeightSource returns: F32, F16, BF16, I32, F8_E4M3
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // absolute byte offsets in the file: [begin, end)
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + N
};

// Validates and parses the header of a safetensors file held in data[0..size):
// header length within bounds, valid JSON object, known dtype names, shape
// product × element size == end - begin, data inside the file. `name` is used
// in error messages.
Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* data, size_t size,
                                                   const std::string& name);

// WeightSource over `folder`/model.safetensors, or the shards listed in
// `folder`/model.safetensors.index.json (the index wins when both exist).
// Every tensor must be F32, F16, BF16 or I32 (AWQ / GPTQ's packed quants,
// io/int_quant_source.h) (else an error naming the tensor and
// dtype). read() returns views into the maps, valid while the source lives
// (a copy only when the data is not aligned to its element size).
Result<std::unique_ptr<WeightSource>> open_safetensors_folder(const std::string& folder);

// Same over an explicit list of files (tensor names must be unique across them).
Result<std::unique_ptr<WeightSource>> open_safetensors_files(const std::vector<std::string>& paths);

}  // namespace pagoda
