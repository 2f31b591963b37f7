// Llama 3.x JSON tool calls: the message is {"name": ..., "parameters": {...}},
// optionally after <|python_tag|>, several calls separated by ';'. Whether a
// message is a call is decided by its first non-space character, so plain
// answers stream through at once. Text after the calls is content; a message
// whose first object is not a call is content, whole.
#include <string>

#include "openai/tools/json_call_reader.h"
#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3Stream : public ToolCallStream {
 public:
  ToolStreamDelta feed(std::string_view text) override {
    ToolStreamDelta delta;
    buffer_ += text;
    while (step(delta)) {
    }
    return delta;
  }

  ToolStreamDelta finish() override {
    ToolStreamDelta delta;
    if (mode_ == Mode::kCall) {
      reader_->finish(delta);
      if (reader_->state() == JsonCallReader::State::kNotACall) not_a_call(delta);
    }
    if (mode_ == Mode::kUndecided || mode_ == Mode::kContent) delta.content += held_ + buffer_;
    buffer_.clear();
    return delta;
  }

 private:
  enum class Mode { kUndecided, kContent, kCall, kBetween };

  bool step(ToolStreamDelta& delta) {
    switch (mode_) {
      case Mode::kUndecided: {
        size_t i = 0;
        while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
        const std::string_view head = std::string_view(buffer_).substr(i);
        if (head.empty() || (head.size() < kPythonTag.size() && kPythonTag.starts_with(head)))
          return false;
        if (head.front() != '{' && !head.starts_with(kPythonTag)) {
          mode_ = Mode::kContent;
          return true;
        }
        held_ = buffer_.substr(0, i);
        buffer_.erase(0, i);
        if (buffer_.starts_with(kPythonTag)) {
          held_ += kPythonTag;
          buffer_.erase(0, kPythonTag.size());
        }
        start_call();
        return true;
      }
      case Mode::kContent:
        delta.content += held_ + buffer_;
        held_.clear();
        buffer_.clear();
        return false;
      case Mode::kCall: {
        buffer_.erase(0, reader_->feed(buffer_, delta));
        if (reader_->state() == JsonCallReader::State::kDone) {
          held_.clear();
          mode_ = Mode::kBetween;
          return true;
        }
        if (reader_->state() == JsonCallReader::State::kNotACall) {
          not_a_call(delta);
          return true;
        }
        return false;
      }
      case Mode::kBetween: {
        size_t i = 0;
        while (i < buffer_.size() && (is_json_space(buffer_[i]) || buffer_[i] == ';')) ++i;
        if (i == buffer_.size()) return false;  // held: may separate calls
        buffer_.erase(0, i);
        if (buffer_[0] == '{') {
          start_call();
        } else {
          mode_ = Mode::kContent;  // text after the calls, without the separators
        }
        return true;
      }
    }
    return false;
  }

  void start_call() {
    reader_.emplace(num_calls_++, new_tool_call_id());
    mode_ = Mode::kCall;
  }

  // The object read is not a call: it and everything after it is content
  // (the whole message when it was the first).
  void not_a_call(ToolStreamDelta& delta) {
    delta.content += held_ + reader_->raw();
    held_.clear();
    --num_calls_;
    mode_ = Mode::kContent;
  }

  Mode mode_ = Mode::kUndecided;
  std::string buffer_;  // text not yet consumed
  std::string held_;    // before the first call: its leading space and <|python_tag|>
  std::optional<JsonCallReader> reader_;
  int num_calls_ = 0;
};

class Llama3Parser : public ToolParser {
 public:
  const char* name() const override { return "llama3_json"; }
  std::unique_ptr<ToolCallStream> start(const Json&) const override {
    return std::make_unique<Llama3Stream>();
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_llama3_json_tool_parser() {
  return std::make_unique<Llama3Parser>();
}

}  // namespace pagoda::openai
