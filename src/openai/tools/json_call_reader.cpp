#include "openai/tools/json_call_reader.h"

#include <algorithm>

namespace pagoda::openai {

namespace {

enum class Match { kYes, kNeedMore, kNo };

// A cursor over the header {"name": "N", "arguments": of a call object.
struct HeaderScan {
  std::string_view s;
  size_t i = 0;

  void skip_space() {
    while (i < s.size() && is_json_space(s[i])) ++i;
  }
  Match expect(char c) {
    skip_space();
    if (i == s.size()) return Match::kNeedMore;
    if (s[i] != c) return Match::kNo;
    ++i;
    return Match::kYes;
  }
  // A JSON string literal (quotes included) into `literal`.
  Match string(std::string_view& literal) {
    skip_space();
    if (i == s.size()) return Match::kNeedMore;
    if (s[i] != '"') return Match::kNo;
    for (size_t j = i + 1; j < s.size(); ++j) {
      if (s[j] == '\\') {
        ++j;
      } else if (s[j] == '"') {
        literal = s.substr(i, j + 1 - i);
        i = j + 1;
        return Match::kYes;
      }
    }
    return Match::kNeedMore;
  }
};

// {"name": "N", "arguments" or "parameters": then '{' or '"': on kYes, `name`
// and `value_at` (where the arguments value starts).
Match match_header(std::string_view s, std::string& name, size_t& value_at) {
  HeaderScan scan{s};
  std::string_view key, literal;
  Match m;
  if ((m = scan.expect('{')) != Match::kYes) return m;
  if ((m = scan.string(key)) != Match::kYes) return m;
  if (key != "\"name\"") return Match::kNo;
  if ((m = scan.expect(':')) != Match::kYes) return m;
  if ((m = scan.string(literal)) != Match::kYes) return m;
  if ((m = scan.expect(',')) != Match::kYes) return m;
  if ((m = scan.string(key)) != Match::kYes) return m;
  if (key != "\"arguments\"" && key != "\"parameters\"") return Match::kNo;
  if ((m = scan.expect(':')) != Match::kYes) return m;
  scan.skip_space();
  if (scan.i == s.size()) return Match::kNeedMore;
  if (s[scan.i] != '{' && s[scan.i] != '"') return Match::kNo;
  const Json parsed = Json::parse(literal, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_string()) return Match::kNo;
  name = parsed.get<std::string>();
  value_at = scan.i;
  return Match::kYes;
}

}  // namespace

size_t JsonCallReader::feed(std::string_view text, ToolStreamDelta& delta) {
  size_t used = 0;
  while (used < text.size() && state_ == State::kReading) {
    const std::string_view rest = text.substr(used);
    switch (phase_) {
      case Phase::kHeader:
        used += feed_header(rest, delta);
        break;
      case Phase::kWhole:
        used += feed_whole(rest, delta);
        break;
      case Phase::kArguments:
        used += feed_arguments(rest, delta);
        break;
      case Phase::kTail:
        used += feed_tail(rest);
        break;
      case Phase::kSkipRest: {
        std::string ignored;
        used += value_.feed(rest, ignored);
        if (value_.state() != JsonValueStream::State::kReading) {
          phase_ = Phase::kEnd;
          state_ = State::kDone;
        }
        break;
      }
      case Phase::kEnd:
        state_ = State::kDone;
        break;
    }
  }
  return used;
}

size_t JsonCallReader::feed_header(std::string_view text, ToolStreamDelta& delta) {
  const size_t before = raw_.size();
  raw_ += text;
  std::string name;
  size_t value_at = 0;
  switch (match_header(raw_, name, value_at)) {
    case Match::kNeedMore:
      return text.size();
    case Match::kNo: {
      // Read the object whole from its start.
      std::string all = std::move(raw_);
      raw_.clear();
      phase_ = Phase::kWhole;
      // An error inside the text consumed before leaves that text consumed.
      const size_t used = std::max(feed_whole(all, delta), before);
      raw_ = all.substr(0, used);
      return used - before;
    }
    case Match::kYes:
      break;
  }
  raw_.resize(value_at);
  delta.begin_call(index_, id_, std::move(name));
  phase_ = Phase::kArguments;
  string_arguments_ = text[value_at - before] == '"';
  value_ = JsonValueStream(/*object_only=*/!string_arguments_);
  return value_at - before;
}

size_t JsonCallReader::feed_whole(std::string_view text, ToolStreamDelta& delta) {
  std::string ignored;
  const size_t used = value_.feed(text, ignored);
  raw_ += text.substr(0, used);
  if (value_.state() == JsonValueStream::State::kError) {
    state_ = State::kNotACall;
  } else if (value_.state() == JsonValueStream::State::kDone) {
    auto call = parse_tool_call_json(raw_);
    if (!call) {
      state_ = State::kNotACall;
    } else {
      delta.begin_call(index_, id_, std::move(call->name));
      delta.add_arguments(index_, call->arguments);
      phase_ = Phase::kEnd;
      state_ = State::kDone;
    }
  }
  return used;
}

size_t JsonCallReader::feed_arguments(std::string_view text, ToolStreamDelta& delta) {
  std::string out;
  const size_t used = value_.feed(text, string_arguments_ ? string_literal_ : out);
  delta.add_arguments(index_, out);
  if (value_.state() != JsonValueStream::State::kReading) end_arguments(delta);
  return used;
}

void JsonCallReader::end_arguments(ToolStreamDelta& delta) {
  std::string out;
  value_.close(string_arguments_ ? string_literal_ : out);
  if (string_arguments_) {
    const Json parsed = Json::parse(string_literal_, nullptr, /*allow_exceptions=*/false);
    out = arguments_from_string(parsed.is_string() ? parsed.get<std::string>() : "");
  }
  delta.add_arguments(index_, out);
  phase_ = Phase::kTail;
}

size_t JsonCallReader::feed_tail(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && is_json_space(text[i])) ++i;
  if (i == text.size()) return i;
  phase_ = Phase::kEnd;
  state_ = State::kDone;
  if (text[i] == '}') return i + 1;
  if (text[i] != ',') return i;  // not JSON: the object ends here
  // More members: skip them to the object's '}'.
  value_ = JsonValueStream(/*object_only=*/true);
  std::string ignored;
  value_.feed("{", ignored);
  phase_ = Phase::kSkipRest;
  state_ = State::kReading;
  return i + 1;
}

void JsonCallReader::finish(ToolStreamDelta& delta) {
  if (state_ != State::kReading) return;
  if (phase_ == Phase::kArguments) end_arguments(delta);
  state_ = announced() ? State::kDone : State::kNotACall;
}

}  // namespace pagoda::openai
