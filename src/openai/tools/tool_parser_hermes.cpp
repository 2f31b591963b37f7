// Hermes / Qwen tool calls: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
// any number per message, content text allowed before and between them.
// Text after a call's object and before </tool_call> is dropped.
#include <string>

#include "openai/tools/json_call_reader.h"
#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

class HermesStream : public ToolCallStream {
 public:
  ToolStreamDelta feed(std::string_view text) override {
    buffer_ += text;
    ToolStreamDelta delta;
    while (step(delta)) {
    }
    return delta;
  }

  ToolStreamDelta finish() override {
    ToolStreamDelta delta;
    if (mode_ == Mode::kCall) {
      reader_->finish(delta);
      if (reader_->state() == JsonCallReader::State::kNotACall) {
        rejected_ = std::string(kOpen) + reader_->raw();
        mode_ = Mode::kRejected;
      }
    }
    if (mode_ == Mode::kContent) content_.add(buffer_, delta.content);
    if (mode_ == Mode::kRejected) content_.add(rejected_ + buffer_, delta.content);
    buffer_.clear();
    if (num_calls_ == 0) content_.flush(delta.content);
    return delta;
  }

 private:
  enum class Mode { kContent, kCall, kAfterCall, kRejected };

  // One step over buffer_; false when it needs more text.
  bool step(ToolStreamDelta& delta) {
    switch (mode_) {
      case Mode::kContent: {
        const size_t open = buffer_.find(kOpen);
        const size_t keep = open == std::string::npos ? partial_tag_suffix(buffer_, kOpen) : 0;
        const size_t end = open == std::string::npos ? buffer_.size() - keep : open;
        content_.add(std::string_view(buffer_).substr(0, end), delta.content);
        if (open == std::string::npos) {
          buffer_.erase(0, end);
          return false;
        }
        buffer_.erase(0, open + kOpen.size());
        reader_.emplace(num_calls_, new_tool_call_id());
        counted_ = false;
        mode_ = Mode::kCall;
        return true;
      }
      case Mode::kCall: {
        const size_t used = reader_->feed(buffer_, delta);
        buffer_.erase(0, used);
        if (reader_->announced() && !counted_) {
          content_.drop();  // whitespace before a call only separates it
          counted_ = true;
          ++num_calls_;
        }
        if (reader_->state() == JsonCallReader::State::kDone) {
          mode_ = Mode::kAfterCall;
          return true;
        }
        if (reader_->state() == JsonCallReader::State::kNotACall) {
          mode_ = Mode::kRejected;
          rejected_ = std::string(kOpen) + reader_->raw();
          return true;
        }
        return false;
      }
      case Mode::kAfterCall:
      case Mode::kRejected: {
        const size_t close = buffer_.find(kClose);
        if (close == std::string::npos) {
          const size_t keep = partial_tag_suffix(buffer_, kClose);
          if (mode_ == Mode::kRejected) rejected_ += buffer_.substr(0, buffer_.size() - keep);
          buffer_.erase(0, buffer_.size() - keep);
          return false;
        }
        if (mode_ == Mode::kRejected) {
          rejected_ += buffer_.substr(0, close + kClose.size());
          content_.add(rejected_, delta.content);
          rejected_.clear();
        }
        buffer_.erase(0, close + kClose.size());
        mode_ = Mode::kContent;
        return true;
      }
    }
    return false;
  }

  std::string buffer_;  // text not yet consumed
  Mode mode_ = Mode::kContent;
  std::optional<JsonCallReader> reader_;
  bool counted_ = false;  // the reader's call is counted in num_calls_
  std::string rejected_;  // kRejected: "<tool_call>" and the text after it so far
  int num_calls_ = 0;
  ContentHoldBack content_;
};

class HermesParser : public ToolParser {
 public:
  const char* name() const override { return "hermes"; }
  std::unique_ptr<ToolCallStream> start(const Json&) const override {
    return std::make_unique<HermesStream>();
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_hermes_tool_parser() {
  return std::make_unique<HermesParser>();
}

}  // namespace pagoda::openai
