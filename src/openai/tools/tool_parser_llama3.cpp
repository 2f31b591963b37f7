// Llama 3.x JSON tool calls: the whole message is {"name": ..., "parameters":
// {...}}, optionally after <|python_tag|>, several calls separated by ';'.
// Whether a message is a call is decided by its first non-space character, so
// plain answers stream through at once; a call is released when the output ends.
#include <string>
#include <vector>

#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Splits "{...}; {...}" into the top-level objects; nullopt if anything other
// than whitespace or ';' lies between them or a brace is unbalanced.
std::optional<std::vector<std::string_view>> split_objects(std::string_view s) {
  std::vector<std::string_view> objects;
  size_t i = 0;
  while (i < s.size()) {
    if (is_space(s[i]) || s[i] == ';') {
      ++i;
      continue;
    }
    if (s[i] != '{') return std::nullopt;
    int depth = 0;
    bool in_string = false;
    size_t j = i;
    for (; j < s.size(); ++j) {
      const char c = s[j];
      if (in_string) {
        if (c == '\\')
          ++j;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        break;
      }
    }
    if (j >= s.size()) return std::nullopt;
    objects.push_back(s.substr(i, j + 1 - i));
    i = j + 1;
  }
  return objects;
}

class Llama3Stream : public ToolCallStream {
 public:
  ToolStreamDelta feed(std::string_view text) override {
    ToolStreamDelta delta;
    buffer_ += text;
    if (mode_ == Mode::kUndecided) decide();
    if (mode_ == Mode::kContent) {
      delta.content = std::move(buffer_);
      buffer_.clear();
    }
    return delta;
  }

  ToolStreamDelta finish() override {
    ToolStreamDelta delta;
    if (mode_ == Mode::kCall && parse_calls(delta)) return delta;
    delta.content = std::move(buffer_);
    buffer_.clear();
    return delta;
  }

 private:
  enum class Mode { kUndecided, kContent, kCall };

  void decide() {
    const std::string_view head = trim(buffer_);
    if (head.empty()) return;
    if (head.front() == '{' || head.starts_with(kPythonTag)) {
      mode_ = Mode::kCall;
    } else if (!kPythonTag.starts_with(head)) {
      mode_ = Mode::kContent;
    }
  }

  // All calls at once, or false (the text is then content).
  bool parse_calls(ToolStreamDelta& delta) {
    std::string_view body = trim(buffer_);
    if (body.starts_with(kPythonTag)) body.remove_prefix(kPythonTag.size());
    auto objects = split_objects(body);
    if (!objects || objects->empty()) return false;
    std::vector<ToolCall> calls;
    for (std::string_view object : *objects) {
      auto call = parse_tool_call_json(object);
      if (!call) return false;
      calls.push_back(std::move(*call));
    }
    for (size_t i = 0; i < calls.size(); ++i) {
      delta.calls.push_back({static_cast<int>(i), std::move(calls[i].id), std::move(calls[i].name),
                             std::move(calls[i].arguments)});
    }
    return true;
  }

  Mode mode_ = Mode::kUndecided;
  std::string buffer_;  // held text: all of it until decided, the call text in kCall
};

class Llama3Parser : public ToolParser {
 public:
  const char* name() const override { return "llama3_json"; }
  std::unique_ptr<ToolCallStream> start() const override {
    return std::make_unique<Llama3Stream>();
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_llama3_json_tool_parser() {
  return std::make_unique<Llama3Parser>();
}

}  // namespace pagoda::openai
