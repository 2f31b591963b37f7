#include "openai/tools/forced_tool_calls.h"

#include <optional>
#include <string_view>

#include "openai/tools/json_call_reader.h"
#include "openai/tools/json_value_stream.h"

namespace pagoda::openai {

namespace {

// [ {call} , {call} ... ]
class RequiredStream : public ToolCallStream {
 public:
  ToolStreamDelta feed(std::string_view text) override {
    ToolStreamDelta delta;
    if (mode_ == Mode::kContent) {
      delta.content += text;
      return delta;
    }
    buffer_ += text;
    while (step(delta)) {
    }
    return delta;
  }

  ToolStreamDelta finish() override {
    ToolStreamDelta delta;
    if (mode_ == Mode::kObject) {
      reader_->finish(delta);
      if (reader_->state() == JsonCallReader::State::kNotACall) delta.content += reader_->raw();
    }
    // Whitespace around the array is not content.
    if (buffer_.find_first_not_of(" \t\r\n") != std::string::npos) delta.content += buffer_;
    buffer_.clear();
    return delta;
  }

 private:
  enum class Mode { kOpen, kElement, kObject, kAfter, kDone, kContent };

  bool step(ToolStreamDelta& delta) {
    if (mode_ == Mode::kObject) {
      buffer_.erase(0, reader_->feed(buffer_, delta));
      if (reader_->state() == JsonCallReader::State::kReading) return false;
      if (reader_->state() == JsonCallReader::State::kNotACall) {
        to_content(reader_->raw(), delta);
        return false;
      }
      ++num_calls_;
      mode_ = Mode::kAfter;
      return true;
    }
    size_t i = 0;
    while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
    if (i == buffer_.size()) return false;
    const char c = buffer_[i];
    const bool ok = (mode_ == Mode::kOpen && c == '[') || (mode_ == Mode::kElement && c == '{') ||
                    (mode_ == Mode::kAfter && (c == ',' || c == ']'));
    if (!ok) {
      buffer_.erase(0, i);
      to_content("", delta);
      return false;
    }
    if (c == '{') {
      buffer_.erase(0, i);
      reader_.emplace(num_calls_, new_tool_call_id());
      mode_ = Mode::kObject;
      return true;
    }
    buffer_.erase(0, i + 1);
    mode_ = c == ']' ? Mode::kDone : Mode::kElement;
    return true;
  }

  // The rest of the output (`held` and the buffer) is content.
  void to_content(std::string_view held, ToolStreamDelta& delta) {
    delta.content += held;
    delta.content += buffer_;
    buffer_.clear();
    mode_ = Mode::kContent;
  }

  Mode mode_ = Mode::kOpen;
  std::string buffer_;
  std::optional<JsonCallReader> reader_;
  int num_calls_ = 0;
};

class NamedStream : public ToolCallStream {
 public:
  explicit NamedStream(std::string name) : name_(std::move(name)) {}

  ToolStreamDelta feed(std::string_view text) override {
    ToolStreamDelta delta;
    announce(delta);
    if (value_.state() != JsonValueStream::State::kReading) return delta;  // the object ended
    std::string out;
    value_.feed(text, out);
    if (value_.state() == JsonValueStream::State::kError) value_.close(out);
    delta.add_arguments(0, out);
    return delta;
  }

  ToolStreamDelta finish() override {
    ToolStreamDelta delta;
    announce(delta);
    std::string out;
    if (!value_.started()) out = "{}";
    if (value_.state() == JsonValueStream::State::kReading) value_.close(out);
    delta.add_arguments(0, out);
    return delta;
  }

 private:
  void announce(ToolStreamDelta& delta) {
    if (announced_) return;
    announced_ = true;
    delta.begin_call(0, new_tool_call_id(), name_);
  }

  std::string name_;
  bool announced_ = false;
  JsonValueStream value_{/*object_only=*/true};
};

class RequiredParser : public ToolParser {
 public:
  const char* name() const override { return "tool_choice required"; }
  std::unique_ptr<ToolCallStream> start(const Json&) const override {
    return std::make_unique<RequiredStream>();
  }
};

class NamedParser : public ToolParser {
 public:
  explicit NamedParser(std::string function_name) : function_name_(std::move(function_name)) {}
  const char* name() const override { return "tool_choice function"; }
  std::unique_ptr<ToolCallStream> start(const Json&) const override {
    return std::make_unique<NamedStream>(function_name_);
  }

 private:
  std::string function_name_;
};

}  // namespace

std::unique_ptr<ToolParser> make_required_tool_call_parser() {
  return std::make_unique<RequiredParser>();
}

std::unique_ptr<ToolParser> make_named_tool_call_parser(std::string function_name) {
  return std::make_unique<NamedParser>(std::move(function_name));
}

}  // namespace pagoda::openai
