// Everything the files of a model say about it apart from its weights,
// resolved once from a ModelLocation: the engine, the tokenizer, the server
// and the CLI commands read the model's metadata from here, never from the
// files again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/gguf.h"
#include "io/hf_tokenizer_config.h"
#include "io/model_config.h"
#include "io/model_location.h"

namespace pagoda {

struct ModelDescription {
  ModelLocation location;
  // kHuggingFace: config.json; kGguf: the metadata (io/gguf_model.h).
  ModelConfig config;
  // kHuggingFace: generation_config.json when present (else all unset).
  // kGguf: the sampling defaults of the general.sampling.* metadata, each
  // overridden by the same field of a generation_config.json in the file's
  // folder when there is one (its eos_token_id is not read); eos_token_ids
  // equal to config.eos_token_ids.
  GenerationDefaults generation;
  // The files the sampling fields of `generation` came from, for the
  // start-up log ("" when none set one).
  std::string generation_source;
  // kHuggingFace: the folder's tokenizer_config.json, special_tokens_map.json
  // and chat templates. kGguf: the two JSON objects empty, chat_templates from
  // tokenizer.chat_template(.NAME).
  HfTokenizerConfig tokenizer_files;
  // kGguf: the parsed file (vocabulary, tokenizer metadata); null otherwise.
  std::shared_ptr<const GgufFile> gguf;
  // The end-of-generation ids the model files name as ids, sorted and unique:
  // config eos_token_id (int or list; for GGUF tokenizer.ggml.eos_token_id,
  // eot_token_id and eom_token_id) ∪ generation_config.json eos_token_id (int
  // or list). A served model stops at these ∪ Tokenizer::eos_ids(), which adds
  // the ids that need the vocabulary: tokenizer_config.json's eos_token text
  // and the special end-of-turn tokens (<|eot_id|>, <|im_end|>, ...).
  std::vector<int32_t> eos_token_ids;
};

// Reads config.json, generation_config.json (optional) and the tokenizer
// files of a folder, or the metadata of a GGUF file (kept open in `gguf`).
// Errors name the file and, for a bad value, the field.
Result<ModelDescription> describe_model(const ModelLocation& location);

}  // namespace pagoda
