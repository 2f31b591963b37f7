// Sharded-checkpoint index reading, shared by the safetensors and PyTorch sources.
#include "io/shard_index.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "io/mapped_file.h"

namespace pagoda {

Result<ShardIndex> read_shard_index(const std::string& index_path) {
  PAGODA_ASSIGN_OR_RETURN(std::string text, read_file_text(index_path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(ErrorCode::kCorrupt, fmt::format("{}: not a valid JSON object", index_path));
  }
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) {
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("{}: missing object field 'weight_map'", index_path));
  }
  ShardIndex index;
  std::set<std::string> seen;
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{}: weight_map['{}'] is not a string", index_path, name));
    }
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
        f == "..") {
      return make_error(
          ErrorCode::kCorrupt,
          fmt::format("{}: weight_map['{}'] names '{}', not a file in the same folder", index_path,
                      name, f));
    }
    index.weight_map[name] = f;
    if (seen.insert(f).second) index.shards.push_back(f);
  }
  return index;
}

Status check_shard_index(const ShardIndex& index, const WeightSource& source,
                         const std::string& index_path) {
  for (const auto& [name, shard] : index.weight_map) {
    if (source.find(name) == nullptr) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{}: tensor '{}' is mapped to {} but not found there",
                                    index_path, name, shard));
    }
  }
  return Status::Ok();
}

}  // namespace pagoda
