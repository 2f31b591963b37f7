#include "jinja/unicode.h"

#include <algorithm>

#include "jinja/unicode_tables.h"

namespace pagoda::jinja::unicode {
namespace {

bool in_ranges(const CodeRange* ranges, size_t n, char32_t cp) {
  const CodeRange* end = ranges + n;
  const CodeRange* it =
      std::upper_bound(ranges, end, cp, [](char32_t c, const CodeRange& r) { return c < r.first; });
  if (it == ranges) return false;
  --it;
  return cp <= it->last;
}

// Appends the mapping of cp (run table, then multi-code-point specials).
// Returns false when cp maps to itself.
bool append_mapped(std::string& out, char32_t cp, const CaseRun* runs, size_t num_runs,
                   const CaseSpecial* special, size_t num_special) {
  for (size_t i = 0; i < num_special; ++i) {
    if (special[i].cp != cp) continue;
    for (char32_t c : special[i].to) {
      if (c != 0) append_utf8(out, c);
    }
    return true;
  }
  const CaseRun* end = runs + num_runs;
  const CaseRun* it =
      std::upper_bound(runs, end, cp, [](char32_t c, const CaseRun& r) { return c < r.first; });
  if (it == runs) return false;
  --it;
  if (cp > it->last || (cp - it->first) % it->step != 0) return false;
  append_utf8(out, static_cast<char32_t>(static_cast<int64_t>(cp) + it->delta));
  return true;
}

}  // namespace

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(next_code_point(s, pos));
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) append_utf8(out, cp);
  return out;
}

void append_py_escape(std::string& out, char32_t cp) {
  static const char* kHex = "0123456789abcdef";
  int digits = cp < 0x100 ? 2 : cp < 0x10000 ? 4 : 8;
  out += cp < 0x100 ? "\\x" : cp < 0x10000 ? "\\u" : "\\U";
  for (int i = digits - 1; i >= 0; --i) out.push_back(kHex[(cp >> (4 * i)) & 0xF]);
}

size_t num_code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

bool is_space(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_printable(char32_t cp) {
  if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
  return !in_ranges(kNonPrintable, kNonPrintable_size, cp);
}

bool is_alpha(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(kAlpha, kAlpha_size, cp);
}

bool is_decimal(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kDecimal, kDecimal_size, cp);
}

bool is_digit(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kDigit, kDigit_size, cp);
}

bool is_numeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumeric, kNumeric_size, cp);
}

bool is_lower(char32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  return in_ranges(kLower, kLower_size, cp);
}

bool is_upper(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  return in_ranges(kUpper, kUpper_size, cp);
}

bool is_alnum(char32_t cp) {
  return is_alpha(cp) || is_decimal(cp) || is_digit(cp) || is_numeric(cp);
}

bool is_word(char32_t cp) {
  return cp == '_' || is_alnum(cp);
}

bool is_cased(char32_t cp) {
  if (is_lower(cp) || is_upper(cp)) return true;
  std::string tmp;
  return append_mapped(tmp, cp, kToLower_runs, kToLower_runs_size, kToLower_special,
                       kToLower_special_size) ||
         append_mapped(tmp, cp, kToUpper_runs, kToUpper_runs_size, kToUpper_special,
                       kToUpper_special_size);
}

void append_upper(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'a' && cp <= 'z' ? cp - 32 : cp));
    return;
  }
  if (!append_mapped(out, cp, kToUpper_runs, kToUpper_runs_size, kToUpper_special,
                     kToUpper_special_size)) {
    append_utf8(out, cp);
  }
}

void append_lower(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  if (!append_mapped(out, cp, kToLower_runs, kToLower_runs_size, kToLower_special,
                     kToLower_special_size)) {
    append_utf8(out, cp);
  }
}

void append_title(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    append_upper(out, cp);
    return;
  }
  if (!append_mapped(out, cp, kToTitle_runs, kToTitle_runs_size, kToTitle_special,
                     kToTitle_special_size)) {
    append_utf8(out, cp);
  }
}

}  // namespace pagoda::jinja::unicode
