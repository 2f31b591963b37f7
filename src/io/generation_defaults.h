// Where a model's sampling defaults come from (the values requests that
// leave temperature, top_p, top_k, min_p, repetition_penalty or max_tokens
// unset take), and the --generation-config choice among them (as vLLM's):
//   auto    the model's own: a folder's generation_config.json; for a .gguf,
//           its general.sampling.* metadata, overridden field by field by a
//           generation_config.json in the file's folder
//   vllm    none: the built-in defaults
//   FOLDER  FOLDER/generation_config.json instead of the model's
// The end-of-generation ids are always the model's own (model_description.h).
#pragma once

#include <string>

#include "core/result.h"
#include "io/gguf.h"
#include "io/model_config.h"

namespace pagoda {

struct SamplingDefaults {
  GenerationDefaults values;  // sampling fields only; eos_token_ids empty
  std::string source;         // the files they came from, "" when none set a value
};

// A GGUF file's general.sampling.temp, top_p, top_k, min_p and
// penalty_repeat (llama.cpp's keys), those present. Errors: a key of the
// wrong type.
Result<GenerationDefaults> gguf_sampling_defaults(const GgufFile& file);

// `base` with each sampling field that `over` sets replaced (eos ids kept).
GenerationDefaults override_sampling(GenerationDefaults base, const GenerationDefaults& over);

// True when any sampling field is set.
bool has_sampling(const GenerationDefaults& g);

// The defaults --generation-config `choice` selects: "auto" → `model` (the
// model's own, from `model_source`), "vllm" → none, else the
// generation_config.json in folder `choice` (an error when it has none).
Result<SamplingDefaults> select_sampling_defaults(const std::string& choice,
                                                  const GenerationDefaults& model,
                                                  const std::string& model_source);

}  // namespace pagoda
