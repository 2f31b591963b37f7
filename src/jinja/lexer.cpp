#include "jinja/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

// Python `\s` (str patterns) at s[pos]: the byte length of the whitespace
// code point there, or 0.
size_t space_len(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return unicode::is_space(c) ? 1 : 0;
  size_t next = pos;
  char32_t cp = unicode::next_code_point(s, next);
  return unicode::is_space(cp) ? next - pos : 0;
}

size_t skip_spaces(std::string_view s, size_t pos) {
  while (size_t n = space_len(s, pos)) pos += n;
  return pos;
}

// Python str.rstrip(): drops trailing whitespace code points.
std::string_view rstrip(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (space_len(s, start) != end - start) break;
    end = start;
  }
  return s.substr(0, end);
}

bool all_spaces(std::string_view s) {
  if (s.empty()) return false;
  return skip_spaces(s, 0) == s.size();
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Regex (\d+_)*\d+ at pos: returns the end, or npos when there is no digit.
size_t match_digits(std::string_view s, size_t pos) {
  if (pos >= s.size() || !is_digit(s[pos])) return std::string_view::npos;
  size_t i = pos;
  while (i < s.size() && is_digit(s[i])) ++i;
  while (i + 1 < s.size() && s[i] == '_' && is_digit(s[i + 1])) {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  return i;
}

size_t match_exponent(std::string_view s, size_t pos) {
  if (pos >= s.size() || (s[pos] != 'e' && s[pos] != 'E')) return std::string_view::npos;
  size_t k = pos + 1;
  if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
  return match_digits(s, k);
}

// jinja2's float_re; returns the end or npos.
size_t match_float(std::string_view s, size_t pos) {
  constexpr size_t npos = std::string_view::npos;
  if (pos > 0 && s[pos - 1] == '.') return npos;
  size_t a = match_digits(s, pos);
  if (a == npos) return npos;
  size_t frac = (a < s.size() && s[a] == '.') ? match_digits(s, a + 1) : npos;
  if (frac != npos) {
    size_t e = match_exponent(s, frac);
    if (e != npos) return e;
  }
  size_t e = match_exponent(s, a);
  if (e != npos) return e;
  return frac;
}

// Regex (_?[digits])+ for a base prefix body.
size_t match_prefixed(std::string_view s, size_t pos, int base) {
  auto ok = [base](char c) {
    if (base == 2) return c == '0' || c == '1';
    if (base == 8) return c >= '0' && c <= '7';
    return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
  };
  size_t i = pos;
  while (true) {
    if (i < s.size() && ok(s[i])) {
      ++i;
    } else if (i + 1 < s.size() && s[i] == '_' && ok(s[i + 1])) {
      i += 2;
    } else {
      break;
    }
  }
  return i == pos ? std::string_view::npos : i;
}

// jinja2's integer_re; returns the end or npos, and the base.
size_t match_integer(std::string_view s, size_t pos, int& base) {
  constexpr size_t npos = std::string_view::npos;
  if (s[pos] == '0' && pos + 1 < s.size()) {
    char p = static_cast<char>(s[pos + 1] | 0x20);
    int b = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 0;
    if (b != 0) {
      size_t end = match_prefixed(s, pos + 2, b);
      if (end != npos) {
        base = b;
        return end;
      }
    }
  }
  base = 10;
  if (s[pos] >= '1' && s[pos] <= '9') {
    size_t i = pos + 1;
    while (true) {
      if (i < s.size() && is_digit(s[i])) {
        ++i;
      } else if (i + 1 < s.size() && s[i] == '_' && is_digit(s[i + 1])) {
        i += 2;
      } else {
        return i;
      }
    }
  }
  if (s[pos] == '0') {
    size_t i = pos + 1;
    while (true) {
      if (i < s.size() && s[i] == '0') {
        ++i;
      } else if (i + 1 < s.size() && s[i] == '_' && s[i + 1] == '0') {
        i += 2;
      } else {
        return i;
      }
    }
  }
  return npos;
}

bool is_name_char(std::string_view s, size_t pos, size_t& len, char32_t& cp) {
  size_t next = pos;
  cp = unicode::next_code_point(s, next);
  len = next - pos;
  if (cp < 0x80) return cp == '_' || is_digit(static_cast<char>(cp)) || unicode::is_alpha(cp);
  return unicode::is_word(cp);
}

// jinja2 unescapes a string token with Python's "unicode-escape" codec
// applied to body.encode("ascii", "backslashreplace"); this decoder does the
// same, quirks included (a backslash before a non-ASCII character escapes
// the backslash of its \xNN form).
class EscapeDecoder {
 public:
  EscapeDecoder(std::string_view body, SourcePos pos) : pos_(pos) {
    size_t i = 0;
    while (i < body.size()) {
      unsigned char c = static_cast<unsigned char>(body[i]);
      if (c < 0x80) {
        ascii_.push_back(static_cast<char>(c));
        ++i;
      } else {
        unicode::append_py_escape(ascii_, unicode::next_code_point(body, i));
      }
    }
  }

  std::string decode() {
    for (i_ = 0; i_ < ascii_.size(); ++i_) {
      char c = ascii_[i_];
      if (c != '\\') {
        out_.push_back(c);
        continue;
      }
      if (i_ + 1 >= ascii_.size()) fail(ErrorKind::kSyntax, "\\ at end of string", pos_);
      escape(ascii_[++i_]);
    }
    return std::move(out_);
  }

 private:
  void escape(char e) {
    static constexpr std::string_view kSimple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
    for (size_t k = 0; k < kSimple.size(); k += 2) {
      if (kSimple[k] == e) {
        out_.push_back(kSimple[k + 1]);
        return;
      }
    }
    switch (e) {
      case '\n':  // line continuation
        return;
      case 'x':
        return append(hex(2, "\\xXX"));
      case 'u':
        return append(hex(4, "\\uXXXX"));
      case 'U':
        return append(hex(8, "\\UXXXXXXXX"));
      case 'N':
        fail(ErrorKind::kUnsupported, "\\N{...} escapes are not supported", pos_);
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      char32_t v = static_cast<char32_t>(e - '0');
      for (int k = 0;
           k < 2 && i_ + 1 < ascii_.size() && ascii_[i_ + 1] >= '0' && ascii_[i_ + 1] <= '7'; ++k) {
        v = v * 8 + static_cast<char32_t>(ascii_[++i_] - '0');
      }
      append(v);
      return;
    }
    out_.push_back('\\');  // unknown escapes stay as they are
    out_.push_back(e);
  }

  // The n hex digits after the escape letter; advances past them.
  char32_t hex(size_t n, const char* what) {
    char32_t v = 0;
    for (size_t k = 1; k <= n; ++k) {
      char h = i_ + k < ascii_.size() ? ascii_[i_ + k] : '\0';
      int d = is_digit(h)                                ? h - '0'
              : ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') ? (h | 0x20) - 'a' + 10
                                                         : -1;
      if (d < 0) fail(ErrorKind::kSyntax, std::string("truncated ") + what + " escape", pos_);
      v = v * 16 + static_cast<char32_t>(d);
    }
    i_ += n;
    return v;
  }

  void append(char32_t cp) {
    if (cp > 0x10FFFF) fail(ErrorKind::kSyntax, "illegal Unicode character", pos_);
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      fail(ErrorKind::kUnsupported, "lone surrogate in a string literal", pos_);
    }
    unicode::append_utf8(out_, cp);
  }

  SourcePos pos_;
  std::string ascii_;
  std::string out_;
  size_t i_ = 0;
};

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    // Newlines normalize to \n; keep_trailing_newline=False drops one final newline.
    std::string s;
    s.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        s.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        s.push_back(source[i]);
      }
    }
    if (!s.empty() && s.back() == '\n') s.pop_back();
    src_ = std::move(s);
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_root();
    Token eof;
    eof.type = TokenType::kEof;
    eof.pos = pos_at(src_.size());
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  enum class TagKind { kVariable, kBlock, kComment, kRaw };

  SourcePos pos_at(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    size_t col = offset - line_starts_[line - 1];
    return SourcePos{static_cast<int>(line), static_cast<int>(col + 1)};
  }

  [[noreturn]] void fail_at(size_t offset, const std::string& message) const {
    fail(ErrorKind::kSyntax, message, pos_at(offset));
  }

  void emit(TokenType type, size_t offset, std::string text = {}) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.pos = pos_at(offset);
    tokens_.push_back(std::move(t));
  }

  bool starts_with(size_t pos, std::string_view s) const {
    return src_.compare(pos, s.size(), s) == 0;
  }

  // `{%` sign? \s* raw \s* (-%}\s* | %}) at pos: the end of the match or npos.
  size_t match_raw_begin(size_t pos) const {
    size_t i = pos + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_spaces(src_, i);
    if (!starts_with(i, "raw")) return std::string::npos;
    i = skip_spaces(src_, i + 3);
    if (starts_with(i, "-%}")) return skip_spaces(src_, i + 3);
    if (starts_with(i, "%}")) return i + 2;
    return std::string::npos;
  }

  // The data before a tag, with whitespace control and lstrip_blocks applied.
  void emit_data_before(size_t start, size_t end, char sign, bool is_variable) {
    std::string_view text(src_.data() + start, end - start);
    if (sign == '-') {
      text = rstrip(text);
    } else if (sign != '+' && !is_variable) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_spaces(text.substr(l_pos))) {
        text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) emit(TokenType::kData, start, std::string(text));
  }

  void lex_root() {
    size_t tag = pos_;
    TagKind kind = TagKind::kBlock;
    size_t match_end = std::string::npos;
    for (;; ++tag) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        emit(TokenType::kData, pos_, src_.substr(pos_));
        pos_ = src_.size();
        return;
      }
      char second = src_[tag + 1];
      if (second == '%') {
        match_end = match_raw_begin(tag);
        kind = match_end != std::string::npos ? TagKind::kRaw : TagKind::kBlock;
        break;
      }
      if (second == '{' || second == '#') {
        kind = second == '{' ? TagKind::kVariable : TagKind::kComment;
        break;
      }
    }
    char sign = 0;
    if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+'))
      sign = src_[tag + 2];
    if (kind != TagKind::kRaw) match_end = tag + 2 + (sign ? 1 : 0);
    emit_data_before(pos_, tag, sign, kind == TagKind::kVariable);
    line_starting_ = src_[match_end - 1] == '\n';
    pos_ = match_end;
    switch (kind) {
      case TagKind::kVariable:
        emit(TokenType::kVariableBegin, tag);
        lex_tag(false);
        break;
      case TagKind::kBlock:
        emit(TokenType::kBlockBegin, tag);
        lex_tag(true);
        break;
      case TagKind::kComment:
        lex_comment();
        break;
      case TagKind::kRaw:
        lex_raw();
        break;
    }
  }

  void lex_comment() {
    size_t q = src_.find("#}", pos_);
    if (q == std::string::npos) {
      if (pos_ < src_.size()) fail_at(pos_, "Missing end of comment tag");
      return;
    }
    size_t end;
    if (q > pos_ && src_[q - 1] == '+') {
      end = q + 2;
    } else if (q > pos_ && src_[q - 1] == '-') {
      end = skip_spaces(src_, q + 2);
    } else {
      end = q + 2 + (q + 2 < src_.size() && src_[q + 2] == '\n' ? 1 : 0);
    }
    line_starting_ = src_[end - 1] == '\n';
    pos_ = end;
  }

  // `{%` sign? \s* endraw \s* (+%} | -%}\s* | %}\n?) at p: the end or npos.
  size_t match_endraw(size_t p, char& sign) const {
    size_t i = p + 2;
    sign = 0;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) sign = src_[i++];
    i = skip_spaces(src_, i);
    if (!starts_with(i, "endraw")) return std::string::npos;
    i = skip_spaces(src_, i + 6);
    if (starts_with(i, "+%}")) return i + 3;
    if (starts_with(i, "-%}")) return skip_spaces(src_, i + 3);
    if (starts_with(i, "%}")) return i + 2 + (i + 2 < src_.size() && src_[i + 2] == '\n' ? 1 : 0);
    return std::string::npos;
  }

  void lex_raw() {
    for (size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 1)) {
      char sign;
      size_t end = match_endraw(p, sign);
      if (end == std::string::npos) continue;
      emit_data_before(pos_, p, sign, false);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    if (pos_ < src_.size()) fail_at(pos_, "Missing end of raw directive");
  }

  // The end of the tag at pos_, or npos.
  size_t match_tag_end(bool block) const {
    if (block) {
      if (starts_with(pos_, "+%}")) return pos_ + 3;
      if (starts_with(pos_, "-%}")) return skip_spaces(src_, pos_ + 3);
      if (starts_with(pos_, "%}")) {
        return pos_ + 2 + (pos_ + 2 < src_.size() && src_[pos_ + 2] == '\n' ? 1 : 0);
      }
      return std::string::npos;
    }
    if (starts_with(pos_, "-}}")) return skip_spaces(src_, pos_ + 3);
    if (starts_with(pos_, "}}")) return pos_ + 2;
    return std::string::npos;
  }

  void lex_tag(bool block) {
    while (pos_ < src_.size()) {
      if (balance_.empty()) {
        size_t end = match_tag_end(block);
        if (end != std::string::npos) {
          emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, pos_);
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      if (space_len(src_, pos_) > 0) {
        pos_ = skip_spaces(src_, pos_);
        continue;
      }
      lex_tag_token();
    }
  }

  void lex_tag_token() {
    const size_t start = pos_;
    size_t end = match_float(src_, pos_);
    if (end != std::string::npos) {
      std::string digits;
      for (size_t i = start; i < end; ++i) {
        if (src_[i] != '_') digits.push_back(src_[i]);
      }
      emit(TokenType::kFloat, start, src_.substr(start, end - start));
      tokens_.back().float_value = std::strtod(digits.c_str(), nullptr);
      pos_ = end;
      return;
    }
    int base = 10;
    end = match_integer(src_, pos_, base);
    if (end != std::string::npos) {
      lex_integer(start, end, base);
      return;
    }
    size_t len;
    char32_t cp;
    if (is_name_char(src_, pos_, len, cp)) {
      if (!(cp == '_' || unicode::is_alpha(cp))) fail_at(start, "Invalid character in identifier");
      size_t i = pos_ + len;
      while (i < src_.size() && is_name_char(src_, i, len, cp)) i += len;
      emit(TokenType::kName, start, src_.substr(start, i - start));
      pos_ = i;
      return;
    }
    char c = src_[pos_];
    if (c == '\'' || c == '"') {
      for (size_t i = pos_ + 1; i < src_.size(); ++i) {
        if (src_[i] == '\\') {
          ++i;
        } else if (src_[i] == c) {
          std::string_view body(src_.data() + start + 1, i - start - 1);
          emit(TokenType::kString, start, EscapeDecoder(body, pos_at(start)).decode());
          pos_ = i + 1;
          return;
        }
      }
    }
    lex_operator();
  }

  void lex_integer(size_t start, size_t end, int base) {
    std::string digits;
    for (size_t i = start + (base == 10 ? 0 : 2); i < end; ++i) {
      if (src_[i] != '_') digits.push_back(src_[i]);
    }
    errno = 0;
    unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      fail(ErrorKind::kUnsupported, "integer literal too large (integers are 64-bit here)",
           pos_at(start));
    }
    emit(TokenType::kInteger, start, src_.substr(start, end - start));
    tokens_.back().int_value = static_cast<int64_t>(v);
    pos_ = end;
  }

  void lex_operator() {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    size_t start = pos_;
    std::string op;
    for (std::string_view t : kTwo) {
      if (starts_with(pos_, t)) op = t;
    }
    if (op.empty() && kOne.find(src_[pos_]) != std::string_view::npos) op = src_.substr(pos_, 1);
    if (op.empty()) {
      size_t next = pos_;
      char32_t cp = unicode::next_code_point(src_, next);
      std::string ch;
      unicode::append_utf8(ch, cp);
      fail_at(start, "unexpected char " + repr_char(ch) + " at " +
                         std::to_string(unicode::num_code_points(src_.substr(0, pos_))));
    }
    if (op == "(" || op == "[" || op == "{") {
      balance_.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
    } else if (op == ")" || op == "]" || op == "}") {
      if (balance_.empty()) fail_at(start, "unexpected '" + op + "'");
      char expected = balance_.back();
      balance_.pop_back();
      if (expected != op[0]) {
        fail_at(start, "unexpected '" + op + "', expected '" + std::string(1, expected) + "'");
      }
    }
    emit(TokenType::kOperator, start, op);
    pos_ += op.size();
  }

  static std::string repr_char(const std::string& ch) {
    if (ch == "'") return "\"'\"";
    return "'" + ch + "'";
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<char> balance_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (!unicode::is_valid_utf8(source)) fail(ErrorKind::kSyntax, "template is not valid UTF-8");
  return Lexer(source).run();
}

std::string describe_token(const Token& token) {
  switch (token.type) {
    case TokenType::kData:
      return "template data / text";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kName:
    case TokenType::kOperator:
      return token.text;
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

}  // namespace pagoda::jinja
