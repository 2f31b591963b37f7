// UTF-8 helpers and the per-code-point properties of Python's str methods.
// Strings are UTF-8 everywhere in the jinja module; Python indexes them by
// code point, so these helpers convert between the two views.
#pragma once

#include <string>
#include <string_view>

#include "core/utf8.h"

namespace pagoda::jinja::unicode {

// Validation, decoding and encoding are core/utf8.h's.
using ::pagoda::append_utf8;
using ::pagoda::is_valid_utf8;
using ::pagoda::next_code_point;

std::u32string to_u32(std::string_view s);
std::string to_utf8(std::u32string_view s);
size_t num_code_points(std::string_view s);
bool is_ascii(std::string_view s);

// Python str predicates of one code point.
bool is_space(char32_t cp);      // str.isspace
bool is_printable(char32_t cp);  // str.isprintable
bool is_alpha(char32_t cp);
bool is_decimal(char32_t cp);
bool is_digit(char32_t cp);
bool is_numeric(char32_t cp);
bool is_lower(char32_t cp);  // lowercase letter (str.islower of one char)
bool is_upper(char32_t cp);
bool is_alnum(char32_t cp);  // alpha, decimal, digit or numeric
bool is_word(char32_t cp);   // Python regex \w: alnum or '_'
bool is_cased(char32_t cp);  // has a case: lower, upper or changes under a mapping

// Python's backslash escape of a code point: \xNN, \uNNNN or \UNNNNNNNN.
void append_py_escape(std::string& out, char32_t cp);

// Full case mappings (may append several code points, like Python).
void append_upper(std::string& out, char32_t cp);
void append_lower(std::string& out, char32_t cp);
void append_title(std::string& out, char32_t cp);

}  // namespace pagoda::jinja::unicode
