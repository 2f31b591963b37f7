// DeepSeek tool calls, V3 / R1 (vLLM's deepseek_v3):
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
//   ```json
//   {"city": "Paris"}
//   ```<｜tool▁call▁end｜><｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>
// and V3.1's (deepseek_v31), told apart per call by what follows the separator:
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city":
//   "Paris"}<｜tool▁call▁end｜>...
// Text before the calls is content, and so is text after <｜tool▁calls▁end｜>;
// text between a call's arguments and <｜tool▁call▁end｜> is dropped. A call is
// announced once its arguments object starts, and its text streams out as it
// grows (JsonValueStream).
#include <cctype>
#include <string>

#include "openai/tools/json_value_stream.h"
#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

namespace {

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";

enum class Header { kYes, kNeedMore, kNo };

// After <｜tool▁call▁begin｜>: "TYPE<sep>NAME\n```json\n{" (V3) or
// "NAME<sep>{" (V3.1). On kYes, `name` and `args_at` (the '{').
Header match_header(std::string_view s, std::string& name, size_t& args_at) {
  const size_t sep = s.find(kSep);
  if (sep == std::string_view::npos) {
    const std::string_view body = s.substr(0, s.size() - partial_tag_suffix(s, kSep));
    return body.find_first_of("\n<") == std::string_view::npos ? Header::kNeedMore : Header::kNo;
  }
  const std::string_view head = s.substr(0, sep);
  if (head.empty() || head.find_first_of("\n<") != std::string_view::npos) return Header::kNo;
  size_t i = sep + kSep.size();
  auto skip_space = [&] {
    while (i < s.size() && is_json_space(s[i])) ++i;
  };
  skip_space();
  if (i == s.size()) return Header::kNeedMore;
  if (s[i] == '{') {  // V3.1
    name = std::string(head);
    args_at = i;
    return Header::kYes;
  }
  // V3: the name runs to the end of the line, then a ```json fence.
  const size_t eol = s.find('\n', i);
  if (eol == std::string_view::npos) return Header::kNeedMore;
  std::string_view fn = s.substr(i, eol - i);
  while (!fn.empty() && is_json_space(fn.back())) fn.remove_suffix(1);
  if (fn.empty() || fn.find('<') != std::string_view::npos) return Header::kNo;
  i = eol;
  skip_space();
  const std::string_view fence = s.substr(i);
  if (fence.size() < 3)
    return std::string_view("```").starts_with(fence) ? Header::kNeedMore : Header::kNo;
  if (!fence.starts_with("```")) return Header::kNo;
  i += 3;
  while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;  // "json"
  skip_space();
  if (i == s.size()) return Header::kNeedMore;
  if (s[i] != '{') return Header::kNo;
  name = std::string(fn);
  args_at = i;
  return Header::kYes;
}

class DeepSeekStream : public ToolCallStream {
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
    if (mode_ == Mode::kArguments) {
      std::string out;
      args_.close(out);
      delta.add_arguments(num_calls_ - 1, out);
    } else if (mode_ == Mode::kHeader || mode_ == Mode::kBetween) {
      if (group_calls_ == 0) content_.add(group_ + buffer_, delta.content);
    } else if (mode_ == Mode::kContent) {
      content_.add(buffer_, delta.content);
    }
    buffer_.clear();
    if (num_calls_ == 0) content_.flush(delta.content);
    return delta;
  }

 private:
  enum class Mode { kContent, kBetween, kHeader, kArguments, kAfterArguments };

  bool step(ToolStreamDelta& delta) {
    switch (mode_) {
      case Mode::kContent: {
        const size_t at = buffer_.find(kCallsBegin);
        const size_t end = at == std::string::npos
                               ? buffer_.size() - partial_tag_suffix(buffer_, kCallsBegin)
                               : at;
        content_.add(std::string_view(buffer_).substr(0, end), delta.content);
        if (at == std::string::npos) {
          buffer_.erase(0, end);
          return false;
        }
        group_ = kCallsBegin;
        group_calls_ = 0;
        buffer_.erase(0, at + kCallsBegin.size());
        mode_ = Mode::kBetween;
        return true;
      }
      case Mode::kBetween: {  // expects a call or the end of the calls
        size_t i = 0;
        while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
        const std::string_view rest = std::string_view(buffer_).substr(i);
        for (std::string_view tag : {kCallBegin, kCallsEnd}) {
          if (!rest.starts_with(tag)) continue;
          group_ += buffer_.substr(0, i + tag.size());
          buffer_.erase(0, i + tag.size());
          mode_ = tag == kCallBegin ? Mode::kHeader : Mode::kContent;
          if (mode_ == Mode::kContent) group_.clear();
          return true;
        }
        if (kCallBegin.starts_with(rest) || kCallsEnd.starts_with(rest)) return false;
        return reject(delta);
      }
      case Mode::kHeader: {
        std::string name;
        size_t args_at = 0;
        switch (match_header(buffer_, name, args_at)) {
          case Header::kNeedMore:
            return false;
          case Header::kNo:
            return reject(delta);
          case Header::kYes:
            break;
        }
        if (group_calls_++ == 0) content_.drop();
        group_.clear();
        delta.begin_call(num_calls_++, new_tool_call_id(), std::move(name));
        buffer_.erase(0, args_at);
        args_ = JsonValueStream(/*object_only=*/true);
        mode_ = Mode::kArguments;
        return true;
      }
      case Mode::kArguments: {
        std::string out;
        buffer_.erase(0, args_.feed(buffer_, out));
        if (args_.state() != JsonValueStream::State::kReading) args_.close(out);
        delta.add_arguments(num_calls_ - 1, out);
        if (args_.state() == JsonValueStream::State::kReading) return false;
        mode_ = Mode::kAfterArguments;
        return true;
      }
      case Mode::kAfterArguments: {  // the closing fence, dropped up to the call's end
        const size_t end = buffer_.find(kCallEnd);
        if (end == std::string::npos) {
          buffer_.erase(0, buffer_.size() - partial_tag_suffix(buffer_, kCallEnd));
          return false;
        }
        buffer_.erase(0, end + kCallEnd.size());
        mode_ = Mode::kBetween;
        return true;
      }
    }
    return false;
  }

  // The text after <｜tool▁calls▁begin｜> is no call. Before any call of the
  // group, the group's text is content; after one, the rest is.
  bool reject(ToolStreamDelta& delta) {
    if (group_calls_ == 0) content_.add(group_, delta.content);
    group_.clear();
    mode_ = Mode::kContent;
    return true;
  }

  std::string buffer_;  // text not yet consumed
  Mode mode_ = Mode::kContent;
  std::string group_;    // the calls block's text while it may still be content
  int group_calls_ = 0;  // calls announced since <｜tool▁calls▁begin｜>
  JsonValueStream args_;
  int num_calls_ = 0;
  ContentHoldBack content_;
};

class DeepSeekParser : public ToolParser {
 public:
  explicit DeepSeekParser(const char* name) : name_(name) {}
  const char* name() const override { return name_; }
  std::unique_ptr<ToolCallStream> start(const Json&) const override {
    return std::make_unique<DeepSeekStream>();
  }

 private:
  const char* name_;
};

}  // namespace

std::unique_ptr<ToolParser> make_deepseek_v3_tool_parser(const char* name) {
  return std::make_unique<DeepSeekParser>(name);
}

}  // namespace pagoda::openai
