// Which files of a hub repo pagoda downloads.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace pagoda {

// The configuration, tokenizer and chat-template files of a Hugging Face
// model repo that are present in `repo_files`: config.json,
// generation_config.json, tokenizer.json / tokenizer.model /
// tokenizer_config.json / special_tokens_map.json / added_tokens.json /
// vocab.json / merges.txt, chat_template.jinja / chat_template.json and
// additional_chat_templates/*.jinja. In that order (config.json first).
std::vector<std::string> select_metadata_files(const std::vector<std::string>& repo_files);

// The weight files to download: the shards that `index_json` (the text of
// model.safetensors.index.json; empty when the repo has none) maps tensors
// to, else every top-level *.safetensors file, else (a repo of PyTorch
// checkpoints, as published EAGLE heads are) pytorch_model.bin.index.json
// when present and every top-level pytorch_model*.bin (io/torch_checkpoint.h).
// Never .pt / .pth / onnx files. An error names the files when there is
// nothing pagoda can read.
Result<std::vector<std::string>> select_weight_files(const std::vector<std::string>& repo_files,
                                                     const std::string& index_json);

}  // namespace pagoda
