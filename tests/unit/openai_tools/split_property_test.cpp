// The streaming property over every parser and many outputs: each parser reads
// every format's sample outputs (its own and the others'), each whole and cut
// off at every length (max_tokens); any split of the text gives the same
// content and calls as the whole parse, and every call's arguments are one
// JSON object.
#include "tool_parser_testing.h"

namespace pagoda::openai {
namespace {

using testing::check_split_invariance;
using testing::json;

const std::vector<std::string>& samples() {
  static const std::vector<std::string> texts = {
      "Plain text with { braces } and [brackets] and <tags>.",
      "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
      "\"days\": [1, 2.5e1, -3], \"ok\": true}}\n</tool_call>\n<tool_call>{\"name\": \"b\", "
      "\"arguments\": \"{\\\"q\\\": null}\"}</tool_call>",
      "<tool_call>{\"arguments\": {\"x\": {}}, \"name\": \"late_name\"}</tool_call> after",
      "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"s\": \"a;b}\"}}; {\"name\": \"g\", "
      "\"parameters\": {}}",
      "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 3.5}}, {\"name\": \"mul\", "
      "\"arguments\": {\"b\": [\"x\"]}}]",
      "Hi[TOOL_CALLS]add{\"a\": 1}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\\n\"}",
      "<|python_start|>[get_weather(city='San \"Francisco\"', days=3, opts={'a': (1, None)}), "
      "noop()]<|python_end|>",
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
      "<parameter=days>\n4\n</parameter>\n</function>\n</tool_call>",
      "Thinking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n"
      "{\"k\": \"v\"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>g<｜tool▁sep｜>{\"n\": 1}"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜> bye",
  };
  return texts;
}

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                  "days": {"type": "integer"}}}}}])");

TEST(ToolParserSplits, EveryParserEverySampleEveryTruncation) {
  for (const auto& name : tool_parser_names()) {
    auto parser = make_tool_parser(name).value();
    for (const auto& sample : samples()) {
      for (size_t len = 0; len <= sample.size(); ++len) {
        const std::string text = sample.substr(0, len);
        SCOPED_TRACE(name + ": " + text);
        const ParsedToolOutput whole = check_split_invariance(*parser, text, kTools, 3);
        for (const auto& call : whole.tool_calls) {
          const json args = json::parse(call.arguments, nullptr, false);
          EXPECT_TRUE(args.is_object()) << call.arguments;
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::openai
