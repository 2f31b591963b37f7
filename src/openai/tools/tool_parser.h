// Tool-call parsers: turn a model's raw output text into OpenAI tool calls,
// streaming or not. One format per file (tool_parser_<format>.cpp):
//   hermes       <tool_call>{"name": ..., "arguments": {...}}</tool_call>  (Hermes, Qwen 2.5/3)
//   llama3_json  {"name": ..., "parameters": {...}} after optional <|python_tag|>,
//                several calls separated by ';'                          (Llama 3.x)
// Non-streaming parsing is streaming in one piece, so both give the same calls.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pagoda::openai {

struct ToolCall {
  std::string id;  // "call_" + 24 random characters
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

// A piece of one tool call in a stream. The first piece of a call carries its
// id and name; `arguments` pieces concatenate to the call's arguments.
struct ToolCallDelta {
  int index = 0;  // position of the call in the message, from 0
  std::string id;
  std::string name;
  std::string arguments;
};

// What one feed()/finish() step releases: content text and tool-call pieces.
struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

// Parses one choice's output as it streams. Text that might still turn out to
// be part of a call, and whitespace that might only separate calls, is held
// back until resolved. Text that looks like a call but does not parse is
// returned as content, unchanged.
class ToolCallStream {
 public:
  virtual ~ToolCallStream() = default;
  virtual ToolStreamDelta feed(std::string_view text) = 0;  // the next text delta
  virtual ToolStreamDelta finish() = 0;                     // end of output
};

class ToolParser {
 public:
  virtual ~ToolParser() = default;
  virtual const char* name() const = 0;
  virtual std::unique_ptr<ToolCallStream> start() const = 0;
};

struct ParsedToolOutput {
  std::string content;  // text outside the calls ("" when none)
  std::vector<ToolCall> tool_calls;
};

// Parses a complete output.
ParsedToolOutput parse_tool_output(const ToolParser& parser, std::string_view text);

std::unique_ptr<ToolParser> make_hermes_tool_parser();
std::unique_ptr<ToolParser> make_llama3_json_tool_parser();

// By name: "hermes" or "llama3_json"; kInvalidArgument otherwise.
Result<std::unique_ptr<ToolParser>> make_tool_parser(std::string_view name);

// Picks the parser a chat template's text asks for: "<tool_call>" → hermes;
// Llama-3 headers with "<|python_tag|>" or a "parameters" JSON instruction →
// llama3_json; nullptr when the template shows no tool-call format.
std::unique_ptr<ToolParser> detect_tool_parser(std::string_view chat_template);

// Shared by the parsers -----------------------------------------------------

// A call from the JSON text of one call object {"name", "arguments" or
// "parameters"} (arguments as an object or a JSON string); nullopt if the text
// is not such an object.
std::optional<ToolCall> parse_tool_call_json(std::string_view text);

// Holds back trailing whitespace of content so that whitespace around tool
// calls is dropped while plain content passes through byte for byte.
class ContentHoldBack {
 public:
  // Appends to `out` everything of `text` that is final, holding back its
  // trailing whitespace (released by the next non-whitespace text).
  void add(std::string_view text, std::string& out);
  void drop() { pending_.clear(); }  // a call follows: the whitespace separated it
  void flush(std::string& out) {
    out += pending_;
    pending_.clear();
  }

 private:
  std::string pending_;
};

}  // namespace pagoda::openai
