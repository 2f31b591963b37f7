// Hermes / Qwen tool calls: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
// any number per message, content text allowed before and between them.
#include <string>

#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t len = std::min(text.size(), tag.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

class HermesStream : public ToolCallStream {
 public:
  ToolStreamDelta feed(std::string_view text) override {
    buffer_ += text;
    ToolStreamDelta delta;
    while (in_call_ ? take_call(delta) : take_content(delta)) {
    }
    return delta;
  }

  ToolStreamDelta finish() override {
    ToolStreamDelta delta;
    if (in_call_) {
      // The model stopped before </tool_call>: accept the call if it parses.
      if (!emit_call(buffer_, delta)) {
        content_.add(std::string(kOpen) + buffer_, delta.content);
      }
    } else {
      content_.add(buffer_, delta.content);
    }
    buffer_.clear();
    if (num_calls_ == 0) content_.flush(delta.content);
    return delta;
  }

 private:
  // Releases content up to the next <tool_call>; true if a call starts.
  bool take_content(ToolStreamDelta& delta) {
    const size_t open = buffer_.find(kOpen);
    if (open == std::string::npos) {
      const size_t keep = partial_tag_suffix(buffer_, kOpen);
      content_.add(std::string_view(buffer_).substr(0, buffer_.size() - keep), delta.content);
      buffer_.erase(0, buffer_.size() - keep);
      return false;
    }
    content_.add(std::string_view(buffer_).substr(0, open), delta.content);
    buffer_.erase(0, open + kOpen.size());
    in_call_ = true;
    return true;
  }

  // Consumes a complete call body; true if one was complete.
  bool take_call(ToolStreamDelta& delta) {
    const size_t close = buffer_.find(kClose);
    if (close == std::string::npos) return false;
    const std::string body = buffer_.substr(0, close);
    buffer_.erase(0, close + kClose.size());
    in_call_ = false;
    if (!emit_call(body, delta)) {
      content_.add(std::string(kOpen) + body + std::string(kClose), delta.content);
    }
    return true;
  }

  bool emit_call(std::string_view body, ToolStreamDelta& delta) {
    auto call = parse_tool_call_json(body);
    if (!call) return false;
    content_.drop();  // whitespace before a call only separates it
    delta.calls.push_back(
        {num_calls_++, std::move(call->id), std::move(call->name), std::move(call->arguments)});
    return true;
  }

  std::string buffer_;  // text not yet released
  bool in_call_ = false;
  int num_calls_ = 0;
  ContentHoldBack content_;
};

class HermesParser : public ToolParser {
 public:
  const char* name() const override { return "hermes"; }
  std::unique_ptr<ToolCallStream> start() const override {
    return std::make_unique<HermesStream>();
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_hermes_tool_parser() {
  return std::make_unique<HermesParser>();
}

}  // namespace pagoda::openai
