#include "openai/tools/json_value_stream.h"

#include <fmt/format.h>

#include "openai/wire/json_util.h"

namespace pagoda::openai {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool is_token_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '-' ||
         c == '.';
}

// A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool is_number(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    return i > from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

bool is_complete_token(std::string_view s) {
  return s == "true" || s == "false" || s == "null" || is_number(s);
}

}  // namespace

size_t JsonValueStream::feed(std::string_view text, std::string& out) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (state_ != State::kReading) return i;
    const bool top_level_token = expect_ == Expect::kToken && stack_.empty();
    if (!step(text[i], out)) {
      state_ = State::kError;
      return i;
    }
    // A top-level number or literal ends at a delimiter that is not part of it.
    if (state_ == State::kDone && top_level_token) return i;
  }
  return text.size();
}

void JsonValueStream::start_value(std::string& out) {
  out += held_;
  held_.clear();
  started_ = true;
}

void JsonValueStream::end_value() {
  expect_ = Expect::kCommaOrEnd;
  if (stack_.empty()) state_ = State::kDone;
}

bool JsonValueStream::end_token(std::string& out) {
  if (!is_complete_token(token_)) return false;
  start_value(out);
  out += token_;
  token_.clear();
  return true;
}

bool JsonValueStream::string_char(char c, std::string& sink) {
  if (!escape_.empty()) {
    escape_ += c;
    if (escape_.size() == 2) {
      if (std::string_view("\"\\/bfnrtu").find(c) == std::string_view::npos) return false;
      if (c == 'u') return true;
    } else if (!is_hex(c)) {
      return false;
    } else if (escape_.size() < 6) {
      return true;
    }
    sink += escape_;
    escape_.clear();
    return true;
  }
  if (c == '\\') {
    escape_.assign(1, '\\');
  } else if (static_cast<unsigned char>(c) < 0x20) {
    switch (c) {
      case '\n':
        sink += "\\n";
        break;
      case '\r':
        sink += "\\r";
        break;
      case '\t':
        sink += "\\t";
        break;
      case '\b':
        sink += "\\b";
        break;
      case '\f':
        sink += "\\f";
        break;
      default:
        sink += fmt::format("\\u{:04x}", static_cast<int>(c));
    }
  } else {
    sink += c;
  }
  return true;
}

bool JsonValueStream::step(char c, std::string& out) {
  switch (expect_) {
    case Expect::kString:
      if (c == '"' && escape_.empty()) {
        out += '"';
        end_value();
        return true;
      }
      return string_char(c, out);
    case Expect::kKeyString:
      if (c == '"' && escape_.empty()) {
        held_ += '"';
        expect_ = Expect::kColon;
        return true;
      }
      return string_char(c, held_);
    case Expect::kToken:
      if (is_token_char(c)) {
        token_ += c;
        return true;
      }
      if (!end_token(out)) return false;
      end_value();
      if (state_ == State::kDone) return true;  // feed() leaves c unconsumed
      return step(c, out);
    default:
      break;
  }
  if (is_space(c)) return true;
  switch (expect_) {
    case Expect::kValueOrEnd:
      if (c == ']') {
        out += ']';
        stack_.pop_back();
        end_value();
        return true;
      }
      [[fallthrough]];
    case Expect::kValue:
      if (object_only_ && stack_.empty() && c != '{') return false;
      if (c == '{' || c == '[') {
        if (static_cast<int>(stack_.size()) >= kMaxJsonDepth) return false;
        start_value(out);
        out += c;
        stack_.push_back(c);
        expect_ = c == '{' ? Expect::kKeyOrEnd : Expect::kValueOrEnd;
        return true;
      }
      if (c == '"') {
        start_value(out);
        out += '"';
        expect_ = Expect::kString;
        return true;
      }
      if (c == '-' || is_digit(c) || c == 't' || c == 'f' || c == 'n') {
        token_.assign(1, c);
        expect_ = Expect::kToken;
        return true;
      }
      return false;
    case Expect::kKeyOrEnd:
      if (c == '}') {
        out += '}';
        stack_.pop_back();
        end_value();
        return true;
      }
      [[fallthrough]];
    case Expect::kKey:
      if (c != '"') return false;
      held_ += '"';
      expect_ = Expect::kKeyString;
      return true;
    case Expect::kColon:
      if (c != ':') return false;
      held_ += ": ";
      expect_ = Expect::kValue;
      return true;
    case Expect::kCommaOrEnd:
      if (c == ',') {
        held_ = ", ";
        expect_ = stack_.back() == '{' ? Expect::kKey : Expect::kValue;
        return true;
      }
      if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
        out += c;
        stack_.pop_back();
        end_value();
        return true;
      }
      return false;
    default:
      return false;
  }
}

void JsonValueStream::close(std::string& out) {
  if (state_ == State::kDone) return;
  state_ = State::kDone;
  if (expect_ == Expect::kString) {
    out += '"';
  } else if (expect_ == Expect::kToken && is_complete_token(token_)) {
    start_value(out);
    out += token_;
  }
  held_.clear();
  token_.clear();
  escape_.clear();
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) out += *it == '{' ? '}' : ']';
  stack_.clear();
  expect_ = Expect::kCommaOrEnd;
}

std::string normalized_json(std::string_view json_text) {
  JsonValueStream stream(/*object_only=*/false);
  std::string out;
  stream.feed(json_text, out);
  stream.close(out);
  return out;
}

}  // namespace pagoda::openai
