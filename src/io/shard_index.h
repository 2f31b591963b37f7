// The index of a sharded Hugging Face checkpoint (model.safetensors.index.json,
// pytorch_model.bin.index.json): {"weight_map": {tensor: shard file, ...}},
// every shard a file in the index's folder.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/weight_source.h"

namespace pagoda {

struct ShardIndex {
  std::vector<std::string> shards;                // file names, in first-use order
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
};

// Reads and validates the index at `index_path`: a JSON object with an
// object 'weight_map' of string values naming files in the same folder (no
// '/', '\\' or '..'). Errors are kCorrupt naming the file and the entry.
Result<ShardIndex> read_shard_index(const std::string& index_path);

// kCorrupt naming the first tensor of `index` that `source` lacks.
Status check_shard_index(const ShardIndex& index, const WeightSource& source,
                         const std::string& index_path);

}  // namespace pagoda
