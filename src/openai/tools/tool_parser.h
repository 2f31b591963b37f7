// Tool-call parsers: turn a model's raw output text into OpenAI tool calls,
// streaming or not. One format per file (tool_parser_<format>.cpp), named as
// vLLM's --tool-call-parser names them:
//   hermes       <tool_call>{"name": ..., "arguments": {...}}</tool_call>  (Hermes, Qwen 2.5/3)
//   llama3_json  {"name": ..., "parameters": {...}} after optional <|python_tag|>,
//                several calls separated by ';'                         (Llama 3.x)
//   mistral      [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...], or
//                [TOOL_CALLS]name{...} / [TOOL_CALLS]name[ARGS]{...} per call
//   pythonic     [get_weather(city="SF"), other(x=1)]                  (Llama 3.2, Llama 4)
//   qwen3_coder  <tool_call><function=name><parameter=p>value</parameter></function></tool_call>
//   deepseek_v3  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name
//                ```json {...} ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>  (and V3.1's
//                <｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜>)
//
// Streaming: a call's first piece carries its id and name as soon as the name
// is complete; its arguments follow in pieces as the model writes them (JSON
// arguments in JsonValueStream's spelling, holding back only what may still
// change), and the pieces concatenate to the call's final arguments. A call
// cut off by the end of the output is closed (see JsonValueStream::close), so
// arguments are always one JSON object. Non-streaming parsing is streaming in
// one piece, so both give the same content and calls for any split.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {

struct ToolCall {
  std::string id;  // "call_" + 24 random characters (mistral: 9 alphanumerics)
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

// What one feed()/finish() step releases: content text and tool-call pieces,
// at most one piece per call and step (consecutive pieces of a call merge).
struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;

  // The first piece of call `index`: its id and name, arguments "".
  void begin_call(int index, std::string id, std::string name);
  // Argument text of call `index` (begun earlier); "" adds nothing.
  void add_arguments(int index, std::string_view text);
  // Appends a later step's release.
  void append(ToolStreamDelta later);
};

// Parses one choice's output as it streams. Text that might still turn out to
// be part of a call, and whitespace that might only separate calls, is held
// back until resolved. Text that looks like a call but turns out not to be one
// before its name is complete is returned as content, unchanged.
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
  // `tools`: the request's tools array (null when none); formats whose
  // argument values are untyped text (qwen3_coder) type them by its schemas.
  virtual std::unique_ptr<ToolCallStream> start(const Json& tools) const = 0;
};

struct ParsedToolOutput {
  std::string content;  // text outside the calls ("" when none)
  std::vector<ToolCall> tool_calls;
};

// Parses a complete output.
ParsedToolOutput parse_tool_output(const ToolParser& parser, std::string_view text,
                                   const Json& tools = Json());

std::unique_ptr<ToolParser> make_hermes_tool_parser();
std::unique_ptr<ToolParser> make_llama3_json_tool_parser();
std::unique_ptr<ToolParser> make_mistral_tool_parser();
std::unique_ptr<ToolParser> make_pythonic_tool_parser();
std::unique_ptr<ToolParser> make_qwen3_coder_tool_parser();
std::unique_ptr<ToolParser> make_deepseek_v3_tool_parser(const char* name = "deepseek_v3");

// The names make_tool_parser accepts (vLLM's, with its aliases llama4_json,
// llama4_pythonic and deepseek_v31).
const std::vector<std::string>& tool_parser_names();

// By name (tool_parser_names()); kInvalidArgument otherwise.
Result<std::unique_ptr<ToolParser>> make_tool_parser(std::string_view name);

// Picks the parser a chat template's text asks for, where the template shows
// the format unambiguously: "<tool_call>" with "<function=" → qwen3_coder,
// "<tool_call>" → hermes; "[TOOL_CALLS]" → mistral; DeepSeek's
// "<｜tool▁call▁begin｜>" → deepseek_v3; Llama-3/4 headers with a pythonic
// instruction ("[func_name1(") → pythonic, else with "<|python_tag|>" or a
// "parameters" JSON instruction → llama3_json; nullptr when the template shows
// no tool-call format.
std::unique_ptr<ToolParser> detect_tool_parser(std::string_view chat_template);

// Shared by the parsers -----------------------------------------------------

bool is_json_space(char c);

// A fresh tool-call id: "call_" + 24 random alphanumerics.
std::string new_tool_call_id();

// A call from the JSON text of one call object {"name", "arguments" or
// "parameters"} (arguments as an object or a JSON string), arguments
// normalized (normalized_json); nullopt if the text is not such an object.
std::optional<ToolCall> parse_tool_call_json(std::string_view text);

// Arguments given as a JSON string: its JSON object normalized; text that is
// not one is read as far as it is a valid object and closed there ("{}" when
// it does not start one).
std::string arguments_from_string(const std::string& text);

// Length of the longest suffix of `text` that is a proper prefix of `tag`:
// the bytes to hold back because they may start the tag.
size_t partial_tag_suffix(std::string_view text, std::string_view tag);

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
