// A compiled PCRE2 pattern (UTF + UCP, JIT when available) used by the Split
// pre-tokenizer, the Replace normalizer/decoder and the GGUF pre-tokenizer
// presets. Matching is const and thread-safe (per-thread match data).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pagoda::tok {

struct Match {
  size_t start;
  size_t end;
};

class Regex {
 public:
  // Compiles a pattern written for Oniguruma / Rust regex (the syntax of
  // tokenizer.json): \s is widened to Unicode White_Space as those engines do.
  static Result<std::unique_ptr<Regex>> compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends every non-overlapping match in `text` (valid UTF-8), left to right.
  // After an empty match the search resumes one character further.
  void find_all(std::string_view text, std::vector<Match>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  // Returns false when there is no match at or after `from`.
  bool find(std::string_view text, size_t from, Match* m) const;

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// Escapes `literal` so that it matches itself in a PCRE2 pattern.
std::string regex_escape(std::string_view literal);

}  // namespace pagoda::tok
