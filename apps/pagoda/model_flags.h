// Where a command's MODEL comes from: the help text of the MODEL positional
// and the flags that choose a hub download's revision and cache (vLLM's
// names), shared by every command that takes a MODEL.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "io/hub/hub_options.h"

namespace pagoda::app {

// The help of a MODEL positional (commands append their default, if any).
inline constexpr const char* kModelHelp =
    "a model folder (config.json + safetensors, or pytorch_model.bin), a .gguf file, or a Hugging Face repo id: "
    "Org/Name, or Org/Name:QUANT for one .gguf of a GGUF repo (e.g. :Q4_K_M, the default when a "
    "repo has only GGUF files); a repo id is taken from the hub cache, or downloaded into it on "
    "first use (HF_ENDPOINT, HF_TOKEN; HF_HUB_OFFLINE=1: the cache only)";

// Registers --revision and --download-dir on `app`, writing into the
// strings (which must outlive parsing).
void add_model_source_flags(CLI::App& app, std::string& revision, std::string& download_dir);

// The hub settings of the environment with the flags' revision and cache.
inline HubOptions hub_options(const std::string& revision, const std::string& download_dir) {
  return HubOptions::from_env(revision, download_dir);
}

// Registers -hf / --hf-repo (llama-server's spelling): a GGUF repo
// Org/Name[:QUANT] to use as MODEL. Pair with rewrite_single_dash_aliases.
void add_hf_repo_flag(CLI::App& app, std::string& hf_repo);

// After parsing: a non-empty `hf_repo` becomes `model` (with ":Q4_K_M"
// when it names no quantization, as llama-server). false (after printing
// an error prefixed by `command`) when MODEL was given as well.
bool apply_hf_repo(const std::string& hf_repo, std::string& model, const char* command);

// Rewrites llama.cpp-style multi-letter single-dash flags that CLI11 cannot
// declare ("-hf" -> "--hf-repo", "-np" -> "--parallel") in place; `argv` entries are only
// repointed, never freed.
void rewrite_single_dash_aliases(int argc, char** argv);

}  // namespace pagoda::app
