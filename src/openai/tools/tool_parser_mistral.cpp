// Mistral tool calls, after the [TOOL_CALLS] token, in the spellings of its
// tokenizer versions:
//   before v11  [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]
//   v11         [TOOL_CALLS]name{...}[TOOL_CALLS]name{...}
//   v13         [TOOL_CALLS]name[ARGS]{...}
// (and a single object [TOOL_CALLS]{"name": ..., "arguments": ...}). Text
// before the calls is content; text after a call that starts no call is
// content too. Call ids are 9 alphanumerics, as Mistral's tokenizer requires.
#include <string>

#include "openai/tools/json_call_reader.h"
#include "openai/tools/json_value_stream.h"
#include "openai/tools/tool_parser.h"
#include "openai/wire/ids.h"

namespace pagoda::openai {

namespace {

constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

std::string mistral_call_id() {
  return random_id("", 9);
}

class MistralStream : public ToolCallStream {
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
    switch (mode_) {
      case Mode::kObject:
        reader_->finish(delta);
        if (reader_->state() == JsonCallReader::State::kNotACall) reject(reader_->raw(), delta);
        break;
      case Mode::kArguments: {
        std::string out;
        args_.close(out);
        delta.add_arguments(num_calls_ - 1, out);
        break;
      }
      case Mode::kAfterTag:
      case Mode::kName:
      case Mode::kList:
        if (group_calls_ == 0) reject(buffer_, delta);
        buffer_.clear();
        break;
      default:
        break;
    }
    if (mode_ == Mode::kContent) content_.add(buffer_, delta.content);
    buffer_.clear();
    if (num_calls_ == 0) content_.flush(delta.content);
    return delta;
  }

 private:
  enum class Mode { kContent, kAfterTag, kName, kArguments, kList, kObject, kListNext };

  bool step(ToolStreamDelta& delta) {
    switch (mode_) {
      case Mode::kContent: {
        const size_t tag = buffer_.find(kToolCalls);
        const size_t end = tag == std::string::npos
                               ? buffer_.size() - partial_tag_suffix(buffer_, kToolCalls)
                               : tag;
        content_.add(std::string_view(buffer_).substr(0, end), delta.content);
        if (tag == std::string::npos) {
          buffer_.erase(0, end);
          return false;
        }
        buffer_.erase(0, tag + kToolCalls.size());
        group_ = std::string(kToolCalls);
        group_calls_ = 0;
        mode_ = Mode::kAfterTag;
        return true;
      }
      case Mode::kAfterTag: {
        size_t i = 0;
        while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
        if (i == buffer_.size()) return false;
        take(i);
        if (buffer_[0] == '[') {
          take(1);
          mode_ = Mode::kList;
        } else if (buffer_[0] == '{') {
          start_object();
        } else {
          mode_ = Mode::kName;
        }
        return true;
      }
      case Mode::kName:
        return step_name(delta);
      case Mode::kArguments: {
        std::string out;
        buffer_.erase(0, args_.feed(buffer_, out));
        if (args_.state() != JsonValueStream::State::kReading) args_.close(out);
        delta.add_arguments(num_calls_ - 1, out);
        if (args_.state() == JsonValueStream::State::kReading) return false;
        mode_ = Mode::kContent;
        return true;
      }
      case Mode::kList:
      case Mode::kListNext: {
        size_t i = 0;
        while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
        if (i == buffer_.size()) return false;
        take(i);
        const char c = buffer_[0];
        if (mode_ == Mode::kListNext && (c == ',' || c == ']')) {
          take(1);
          if (c == ']')
            mode_ = Mode::kContent;
          else
            mode_ = Mode::kList;
        } else if (mode_ == Mode::kList && c == '{') {
          start_object();
        } else if (group_calls_ == 0) {
          reject("", delta);
        } else {
          mode_ = Mode::kContent;
        }
        return true;
      }
      case Mode::kObject: {
        const size_t used = reader_->feed(buffer_, delta);
        buffer_.erase(0, used);
        if (reader_->announced() && !counted_) {
          counted_ = true;
          announce_group();
        }
        if (reader_->state() == JsonCallReader::State::kDone) {
          group_ += reader_->raw();
          mode_ = list_ ? Mode::kListNext : Mode::kContent;
          return true;
        }
        if (reader_->state() == JsonCallReader::State::kNotACall) {
          if (group_calls_ == 0) {
            reject(reader_->raw(), delta);
          } else {
            content_.add(reader_->raw(), delta.content);
            mode_ = Mode::kContent;
          }
          return true;
        }
        return false;
      }
    }
    return false;
  }

  // [TOOL_CALLS]name{ or [TOOL_CALLS]name[ARGS]{
  bool step_name(ToolStreamDelta& delta) {
    size_t i = 0;
    while (i < buffer_.size() && is_name_char(buffer_[i])) ++i;
    if (i == buffer_.size()) return false;
    const std::string_view rest = std::string_view(buffer_).substr(i);
    size_t args_at = std::string::npos;
    if (rest[0] == '{') {
      args_at = i;
    } else if (rest.starts_with(kArgs)) {
      args_at = i + kArgs.size();
      while (args_at < buffer_.size() && is_json_space(buffer_[args_at])) ++args_at;
      if (args_at == buffer_.size()) return false;
      if (buffer_[args_at] != '{') args_at = std::string::npos;
    } else if (kArgs.starts_with(rest)) {
      return false;  // may be [ARGS]
    }
    if (i == 0 || args_at == std::string::npos) {
      reject("", delta);
      return true;
    }
    const std::string name = buffer_.substr(0, i);
    buffer_.erase(0, args_at);
    announce_group();
    delta.begin_call(num_calls_++, mistral_call_id(), name);
    args_ = JsonValueStream(/*object_only=*/true);
    mode_ = Mode::kArguments;
    return true;
  }

  void start_object() {
    list_ = mode_ == Mode::kList;
    reader_.emplace(num_calls_, mistral_call_id());
    counted_ = false;
    mode_ = Mode::kObject;
  }

  // A call of this [TOOL_CALLS] group is announced.
  void announce_group() {
    if (mode_ == Mode::kObject) ++num_calls_;
    if (group_calls_++ == 0) content_.drop();
  }

  // Moves n bytes of buffer_ into the group's text.
  void take(size_t n) {
    group_ += buffer_.substr(0, n);
    buffer_.erase(0, n);
  }

  // The group announced no call: its text so far (and `more`) is content.
  void reject(std::string_view more, ToolStreamDelta& delta) {
    content_.add(group_ + std::string(more), delta.content);
    group_.clear();
    mode_ = Mode::kContent;
  }

  std::string buffer_;  // text not yet consumed
  Mode mode_ = Mode::kContent;
  std::string group_;    // the current [TOOL_CALLS] group's text while it may be content
  int group_calls_ = 0;  // calls announced in the current group
  bool list_ = false;    // the object being read is in a list
  std::optional<JsonCallReader> reader_;
  bool counted_ = false;
  JsonValueStream args_;
  int num_calls_ = 0;
  ContentHoldBack content_;
};

class MistralParser : public ToolParser {
 public:
  const char* name() const override { return "mistral"; }
  std::unique_ptr<ToolCallStream> start(const Json&) const override {
    return std::make_unique<MistralStream>();
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_mistral_tool_parser() {
  return std::make_unique<MistralParser>();
}

}  // namespace pagoda::openai
