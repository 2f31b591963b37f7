#include "openai/tools/python_literal.h"

#include <charconv>
#include <cmath>
#include <optional>

#include "core/utf8.h"

namespace pagoda::openai {

namespace {

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool is_ident_char(char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void PythonCursor::skip_space() {
  while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
    ++i_;
}

PyRead PythonCursor::expect(char c) {
  skip_space();
  if (at_end()) return PyRead::kIncomplete;
  if (s_[i_] != c) return PyRead::kError;
  ++i_;
  return PyRead::kOk;
}

PyRead PythonCursor::identifier(std::string& out) {
  skip_space();
  out.clear();
  for (;;) {
    if (at_end()) return PyRead::kIncomplete;
    if (!is_ident_start(s_[i_])) return PyRead::kError;
    while (i_ < s_.size() && is_ident_char(s_[i_])) out += s_[i_++];
    if (at_end()) return PyRead::kIncomplete;
    if (s_[i_] != '.') return PyRead::kOk;
    out += s_[i_++];
  }
}

PyRead PythonCursor::literal(Json& out, int depth) {
  skip_space();
  if (at_end()) return PyRead::kIncomplete;
  const char c = s_[i_];
  if (c == '\'' || c == '"') return string(out);
  if (is_digit(c) || c == '-' || c == '+' || c == '.') return number(out);
  if (c == '[' || c == '(' || c == '{') {
    if (depth >= kMaxJsonDepth) return PyRead::kError;
    ++i_;
    if (c == '{') return dict(out, depth + 1);
    return sequence(c == '[' ? ']' : ')', out, depth + 1);
  }
  if (!is_ident_start(c)) return PyRead::kError;
  const size_t start = i_;
  while (i_ < s_.size() && is_ident_char(s_[i_])) ++i_;
  if (at_end()) return PyRead::kIncomplete;
  const std::string_view word = s_.substr(start, i_ - start);
  if (word == "True") {
    out = true;
  } else if (word == "False") {
    out = false;
  } else if (word == "None") {
    out = nullptr;
  } else {
    i_ = start;
    return PyRead::kError;
  }
  return PyRead::kOk;
}

PyRead PythonCursor::string(Json& out) {
  const char quote = s_[i_];
  const bool triple = s_.substr(i_, 3) == std::string(3, quote);
  if (!triple && s_.size() - i_ < 3 && std::string(s_.size() - i_, quote) == s_.substr(i_))
    return PyRead::kIncomplete;  // '' or "" may start a triple quote
  i_ += triple ? 3 : 1;
  std::string text;
  while (i_ < s_.size()) {
    const char c = s_[i_];
    if (c == quote) {
      if (!triple) {
        ++i_;
        out = std::move(text);
        return PyRead::kOk;
      }
      if (s_.size() - i_ < 3) return PyRead::kIncomplete;
      if (s_.substr(i_, 3) == std::string(3, quote)) {
        i_ += 3;
        out = std::move(text);
        return PyRead::kOk;
      }
      text += c;
      ++i_;
      continue;
    }
    if (c == '\n' && !triple) return PyRead::kError;
    if (c != '\\') {
      text += c;
      ++i_;
      continue;
    }
    if (i_ + 1 >= s_.size()) return PyRead::kIncomplete;
    const char e = s_[i_ + 1];
    i_ += 2;
    switch (e) {
      case 'n':
        text += '\n';
        break;
      case 't':
        text += '\t';
        break;
      case 'r':
        text += '\r';
        break;
      case 'b':
        text += '\b';
        break;
      case 'f':
        text += '\f';
        break;
      case 'v':
        text += '\v';
        break;
      case 'a':
        text += '\a';
        break;
      case '0':
        text += '\0';
        break;
      case '\n':
        break;
      case '\\':
      case '\'':
      case '"':
        text += e;
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (s_.size() - i_ < n) return PyRead::kIncomplete;
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int v = hex_value(s_[i_ + k]);
          if (v < 0) return PyRead::kError;
          cp = cp * 16 + static_cast<uint32_t>(v);
        }
        if (cp > 0x10FFFF) return PyRead::kError;
        i_ += n;
        append_utf8(text, cp);
        break;
      }
      default:  // Python keeps an unknown escape as written
        text += '\\';
        text += e;
    }
  }
  return PyRead::kIncomplete;
}

PyRead PythonCursor::number(Json& out) {
  const size_t start = i_;
  if (s_[i_] == '-' || s_[i_] == '+') ++i_;
  bool is_float = false;
  while (i_ < s_.size() &&
         (is_digit(s_[i_]) || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '_' ||
          ((s_[i_] == '-' || s_[i_] == '+') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E')))) {
    if (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E') is_float = true;
    ++i_;
  }
  if (at_end()) return PyRead::kIncomplete;  // more digits may follow
  std::string digits;
  for (char c : s_.substr(start, i_ - start)) {
    if (c != '_' && c != '+') digits += c;
  }
  if (!is_float) {
    int64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec == std::errc() && end == digits.data() + digits.size()) {
      out = value;
      return PyRead::kOk;
    }
  }
  // Floats, and ints beyond int64 (as JSON numbers they are doubles anyway).
  const Json parsed = Json::parse(digits.front() == '.' ? "0" + digits : digits, nullptr, false);
  if (!parsed.is_number() || !std::isfinite(parsed.get<double>())) {
    // "1." is a Python float; JSON needs a digit after the point.
    if (!digits.empty() && digits.back() == '.') {
      const Json whole = Json::parse(digits + "0", nullptr, false);
      if (whole.is_number()) {
        out = whole.get<double>();
        return PyRead::kOk;
      }
    }
    i_ = start;
    return PyRead::kError;
  }
  out = is_float ? Json(parsed.get<double>()) : parsed;
  return PyRead::kOk;
}

PyRead PythonCursor::sequence(char close, Json& out, int depth) {
  out = Json::array();
  for (;;) {
    skip_space();
    if (at_end()) return PyRead::kIncomplete;
    if (s_[i_] == close) {
      ++i_;
      return PyRead::kOk;
    }
    Json item;
    if (PyRead r = literal(item, depth); r != PyRead::kOk) return r;
    out.push_back(std::move(item));
    skip_space();
    if (at_end()) return PyRead::kIncomplete;
    if (s_[i_] == ',') {
      ++i_;
    } else if (s_[i_] != close) {
      return PyRead::kError;
    }
  }
}

PyRead PythonCursor::dict(Json& out, int depth) {
  out = Json::object();
  for (;;) {
    skip_space();
    if (at_end()) return PyRead::kIncomplete;
    if (s_[i_] == '}') {
      ++i_;
      return PyRead::kOk;
    }
    Json key, value;
    if (PyRead r = literal(key, depth); r != PyRead::kOk) return r;
    if (!key.is_string()) return PyRead::kError;
    if (PyRead r = expect(':'); r != PyRead::kOk) return r;
    if (PyRead r = literal(value, depth); r != PyRead::kOk) return r;
    out[key.get<std::string>()] = std::move(value);
    skip_space();
    if (at_end()) return PyRead::kIncomplete;
    if (s_[i_] == ',') {
      ++i_;
    } else if (s_[i_] != '}') {
      return PyRead::kError;
    }
  }
}

std::optional<Json> parse_python_literal(std::string_view text) {
  // A space after the text lets a number or name at its very end complete.
  const std::string padded = std::string(text) + " ";
  PythonCursor cursor(padded);
  Json value;
  if (cursor.literal(value) != PyRead::kOk) return std::nullopt;
  cursor.skip_space();
  if (!cursor.at_end()) return std::nullopt;
  return value;
}

}  // namespace pagoda::openai
