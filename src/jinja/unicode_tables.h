// Unicode property tables generated from Python's unicodedata
// (gen_unicode_tables.py → unicode_tables.cpp). Use them through unicode.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pagoda::jinja::unicode {

struct CodeRange {
  char32_t first, last;  // inclusive
};

// Code points first, first+step, ..., last map to cp + delta.
struct CaseRun {
  char32_t first, last;
  int32_t step;
  int32_t delta;
};

// A code point whose mapping is several code points (0-terminated if < 3).
struct CaseSpecial {
  char32_t cp;
  char32_t to[3];
};

extern const CodeRange kNonPrintable[];
extern const size_t kNonPrintable_size;
extern const CodeRange kAlpha[];
extern const size_t kAlpha_size;
extern const CodeRange kDecimal[];
extern const size_t kDecimal_size;
extern const CodeRange kDigit[];
extern const size_t kDigit_size;
extern const CodeRange kNumeric[];
extern const size_t kNumeric_size;
extern const CodeRange kLower[];
extern const size_t kLower_size;
extern const CodeRange kUpper[];
extern const size_t kUpper_size;

extern const CaseRun kToUpper_runs[];
extern const size_t kToUpper_runs_size;
extern const CaseSpecial kToUpper_special[];
extern const size_t kToUpper_special_size;
extern const CaseRun kToLower_runs[];
extern const size_t kToLower_runs_size;
extern const CaseSpecial kToLower_special[];
extern const size_t kToLower_special_size;
extern const CaseRun kToTitle_runs[];
extern const size_t kToTitle_runs_size;
extern const CaseSpecial kToTitle_special[];
extern const size_t kToTitle_special_size;

}  // namespace pagoda::jinja::unicode
