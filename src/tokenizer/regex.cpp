#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "tokenizer/unicode_data.h"
#include "core/utf8.h"

namespace pagoda::tok {

namespace {

constexpr std::string_view kWordClass = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D})";

// The class body of \w: Oniguruma's and Rust's Unicode word characters.
const std::string& word_class() {
  static const std::string body = std::string(kWordClass) + class_additions_after_unicode14("L") +
                                  class_additions_after_unicode14("M") +
                                  class_additions_after_unicode14("Nd") +
                                  class_additions_after_unicode14("Pc");
  return body;
}

// Emits a class body `body` (negated when `negate`) at the current spot.
void emit_class(std::string& out, const std::string& body, bool negate, bool in_class) {
  if (in_class) {
    out += body;  // a negated escape inside a class is left to the caller
  } else {
    out += negate ? "[^" : "[";
    out += body;
    out += ']';
  }
}

// Rewrites a tokenizer.json regex (Oniguruma / Rust syntax) for PCRE2:
// - \s is White_Space (PCRE2's UCP \s also takes U+180E) and \w is
//   Alphabetic, marks, decimal digits, connector punctuation and joiners
//   (PCRE2's takes every number but no marks);
// - \p{X} / \d also cover the characters assigned in Unicode 15.0-16.0, which
//   Oniguruma knows and PCRE2 10.42 does not.
// \W, \D and \P{..} inside a character class are kept as they are.
std::string translate_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[++i];
      bool upper = e == 'W' || e == 'D' || e == 'P';
      if (e == 's' || e == 'S') {
        out += e == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
      } else if ((e == 'w' || (e == 'W' && !in_class))) {
        emit_class(out, word_class(), upper, in_class);
      } else if ((e == 'd' || (e == 'D' && !in_class))) {
        emit_class(out, "\\p{Nd}" + class_additions_after_unicode14("Nd"), upper, in_class);
      } else if ((e == 'p' || (e == 'P' && !in_class)) && i + 1 < pattern.size()) {
        size_t name_start = i + 1, name_end = i + 2;
        if (pattern[i + 1] == '{') {
          name_start = i + 2;
          name_end = pattern.find('}', name_start);
          if (name_end == std::string_view::npos) name_end = pattern.size();
        }
        std::string name(pattern.substr(name_start, name_end - name_start));
        std::string escape = "\\p{" + name + "}";
        i = pattern[i + 1] == '{' ? std::min(name_end, pattern.size() - 1) : i + 1;
        emit_class(out, escape + class_additions_after_unicode14(name), upper, in_class);
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  ~MatchData() { pcre2_match_data_free(data); }
};

pcre2_match_data* thread_match_data() {
  thread_local MatchData md;
  return md.data;
}

}  // namespace

Result<std::unique_ptr<Regex>> Regex::compile(std::string_view pattern) {
  std::string translated = translate_classes(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return make_error(ErrorCode::kInvalidArgument,
                      "tokenizer regex '" + std::string(pattern) + "' does not compile at offset " +
                          std::to_string(error_offset) + ": " + reinterpret_cast<char*>(message));
  }
  std::unique_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  re->code_ = code;
  re->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return re;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

bool Regex::find(std::string_view text, size_t from, Match* m) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = thread_match_data();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), from, 0, md, nullptr)
                : pcre2_match(code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    rc = pcre2_match(code, subject, text.size(), from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                     nullptr);
  }
  if (rc < 0) return false;  // no match (or a match limit: treat as none)
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  m->start = ov[0];
  m->end = ov[1];
  return true;
}

void Regex::find_all(std::string_view text, std::vector<Match>& out) const {
  size_t pos = 0;
  Match m{};
  while (pos <= text.size() && find(text, pos, &m)) {
    out.push_back(m);
    if (m.end > m.start) {
      pos = m.end;
    } else {
      if (m.end >= text.size()) break;
      pos = m.end + utf8_len(static_cast<unsigned char>(text[m.end]));
    }
  }
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  out.reserve(literal.size() * 2);
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#&~ \t\n\r").find(c) != std::string_view::npos) {
      if (c == '\t') {
        out += "\\t";
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else {
        out += '\\';
        out += c;
      }
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace pagoda::tok
