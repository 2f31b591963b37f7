// --load-format (vLLM's flag): where a model's weights come from.
#pragma once

#include <string>

#include "core/result.h"
#include "io/model_files.h"
#include "io/model_location.h"

namespace pagoda {

// The --load-format values, for --help and errors.
inline constexpr const char* kLoadFormats[] = {"auto", "dummy"};

// Checks `load_format` is one of kLoadFormats; the error names --load-format.
Status check_load_format(const std::string& load_format);

// "auto": open_model(location), the model's own weights. "dummy": the
// description of the model (config.json or GGUF metadata, tokenizer files)
// with random weights of its shapes (model/dummy_weights.h) instead of its
// weight files, which need not exist: for benchmarks and tests of shapes;
// outputs are meaningless. Logs what was opened, like open_model.
Result<OpenedModel> open_model_as(const ModelLocation& location, const std::string& load_format);

}  // namespace pagoda
