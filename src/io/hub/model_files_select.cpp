#include "io/hub/model_files_select.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

namespace pagoda {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool contains(const std::vector<std::string>& files, const std::string& name) {
  return std::find(files.begin(), files.end(), name) != files.end();
}

}  // namespace

std::vector<std::string> select_metadata_files(const std::vector<std::string>& repo_files) {
  static const char* const kNames[] = {"config.json",
                                       "generation_config.json",
                                       "hf_quant_config.json",
                                       "tokenizer.json",
                                       "tokenizer.model",
                                       "tokenizer_config.json",
                                       "special_tokens_map.json",
                                       "added_tokens.json",
                                       "vocab.json",
                                       "merges.txt",
                                       "chat_template.jinja",
                                       "chat_template.json"};
  std::vector<std::string> out;
  for (const char* name : kNames) {
    if (contains(repo_files, name)) out.emplace_back(name);
  }
  for (const std::string& f : repo_files) {
    if (f.rfind("additional_chat_templates/", 0) == 0 && ends_with(f, ".jinja")) out.push_back(f);
  }
  return out;
}

Result<std::vector<std::string>> select_weight_files(const std::vector<std::string>& repo_files,
                                                     const std::string& index_json) {
  std::vector<std::string> out;
  if (!index_json.empty()) {
    const auto index = nlohmann::json::parse(index_json, nullptr, false);
    if (index.is_discarded() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      return make_error(ErrorCode::kCorrupt,
                        "model.safetensors.index.json has no weight_map object");
    }
    std::set<std::string> shards;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (file.is_string()) shards.insert(file.get<std::string>());
    }
    for (const std::string& shard : shards) {
      if (!contains(repo_files, shard)) {
        return make_error(
            ErrorCode::kCorrupt,
            fmt::format("model.safetensors.index.json names '{}', which the repo lacks", shard));
      }
      out.push_back(shard);
    }
    return out;
  }
  for (const std::string& f : repo_files) {
    if (f.find('/') == std::string::npos && ends_with(f, ".safetensors")) out.push_back(f);
  }
  if (!out.empty()) return out;
  if (contains(repo_files, "pytorch_model.bin.index.json")) out.push_back("pytorch_model.bin.index.json");
  for (const std::string& f : repo_files) {
    if (f.rfind("pytorch_model", 0) == 0 && ends_with(f, ".bin")) out.push_back(f);
  }
  if (out.empty() || out.back() == "pytorch_model.bin.index.json") {
    std::string names;
    for (const std::string& f : repo_files) names += (names.empty() ? "" : ", ") + f;
    return make_error(
        ErrorCode::kUnsupported,
        fmt::format("the repo has no .safetensors or pytorch_model.bin weights (pagoda reads "
                    "safetensors, PyTorch zip checkpoints or GGUF, not .pt/onnx); its files: {}",
                    names));
  }
  return out;
}

}  // namespace pagoda
