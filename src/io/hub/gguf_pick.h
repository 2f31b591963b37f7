// Choosing one GGUF file of a repo by quantization tag, like
// `llama-server -hf org/repo:Q4_K_M`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pagoda {

// The quantization picked when a GGUF repo is named without a tag.
inline constexpr const char* kDefaultGgufQuant = "Q4_K_M";

// A model named by repo: "org/name" or "org/name:QUANT".
struct RepoModelSpec {
  std::string repo_id;
  std::optional<std::string> quant;  // the text after ':', when given
};

// Splits "org/name:QUANT" at the last ':' (which must follow the last '/');
// nullopt when `spec` is not shaped like a repo id: one or two parts of
// letters, digits, '-', '_' and '.' (not "." or ".."), and a non-empty tag.
std::optional<RepoModelSpec> parse_repo_model_spec(std::string_view spec);

// The .gguf file of `files` (repo-relative paths) for `quant`: the one whose
// file name contains the tag case-insensitively, preferring a match not
// followed by another letter, digit or '_' (Q4_K picks "x-Q4_K.gguf" over
// "x-Q4_K_M.gguf"). Multimodal projector files (mmproj) are skipped. Errors
// list the quantizations available; a split GGUF (-00001-of-0000N) is an
// error: pagoda reads single-file GGUFs.
Result<std::string> pick_gguf_file(const std::vector<std::string>& files, const std::string& quant);

// The quantization tag in a GGUF file name ("x.Q4_K_M.gguf" -> "Q4_K_M"),
// or the file name without .gguf when none is recognised.
std::string gguf_quant_of(const std::string& file);

}  // namespace pagoda
