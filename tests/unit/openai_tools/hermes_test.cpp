// The hermes format: <tool_call>{"name": ..., "arguments": {...}}</tool_call>.
#include "tool_parser_testing.h"

namespace pagoda::openai {
namespace {

using testing::check_splits;
using testing::json;

TEST(HermesToolParser, Formats) {
  auto parser = make_hermes_tool_parser();
  check_splits(*parser, "Hello there, how can I help?", {"Hello there, how can I help?", {}});
  check_splits(*parser, "  spaced  \n", {"  spaced  \n", {}});
  check_splits(*parser,
               "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
               "\"Paris\"}}\n</tool_call>",
               {"", {{"get_weather", json{{"city", "Paris"}}}}});
  check_splits(
      *parser,
      "Let me check.\n<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
      {"Let me check.", {{"a", json{{"x", 1}}}, {"b", json::object()}}});
  // Arguments given as a JSON string are that JSON.
  check_splits(*parser,
               "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"q\\\": 2}\"}</tool_call>",
               {"", {{"a", json{{"q", 2}}}}});
  // Arguments before the name: read whole.
  check_splits(
      *parser,
      "<tool_call>{\"arguments\": {\"k\": [1, {\"n\": null}]}, \"name\": \"f\"}</tool_call>",
      {"", {{"f", json{{"k", json::array({1, json{{"n", nullptr}}})}}}}});
  // Nested values, escapes, unicode and extra members after the arguments.
  check_splits(*parser,
               "<tool_call>{\"name\": \"s\", \"arguments\": {\"q\": \"a \\\"b\\\" \\u00e9 é}{\", "
               "\"n\": -1.5e3, \"t\": true, \"l\": [[], {}]}, \"id\": 7}</tool_call>",
               {"",
                {{"s", json{{"q", "a \"b\" é é}{"},
                            {"n", -1.5e3},
                            {"t", true},
                            {"l", json::array({json::array(), json::object()})}}}}});
  // An unterminated call at the end still counts.
  check_splits(*parser, "<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": \"v\"}}",
               {"", {{"a", json{{"k", "v"}}}}});
  // Cut off inside the arguments: the call is closed where the output ended.
  check_splits(*parser, "<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": \"va",
               {"", {{"a", json{{"k", "va"}}}}});
  check_splits(*parser, "<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": 1, \"j\": tr",
               {"", {{"a", json{{"k", 1}}}}});
  // A call that does not parse before its name is complete is content, unchanged.
  check_splits(*parser, "<tool_call>not json</tool_call> after",
               {"<tool_call>not json</tool_call> after", {}});
  check_splits(*parser, "<tool_call>{\"name\": ", {"<tool_call>{\"name\": ", {}});
  check_splits(*parser, "<tool_call>{\"answer\": 42}</tool_call>",
               {"<tool_call>{\"answer\": 42}</tool_call>", {}});
  // A partial opening tag at the end is content.
  check_splits(*parser, "x <tool_ca", {"x <tool_ca", {}});
  check_splits(*parser, "a < b and <tool> c", {"a < b and <tool> c", {}});
}

TEST(HermesToolParser, HoldsBackPartialTag) {
  auto parser = make_hermes_tool_parser();
  auto stream = parser->start(nullptr);
  EXPECT_EQ(stream->feed("Sure <tool").content, "Sure");
  auto d = stream->feed("_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "f");
  EXPECT_EQ(d.calls[0].arguments, "{}");
}

// The arguments stream out as the model writes them: the call is announced
// once they start, and each piece is final.
TEST(HermesToolParser, StreamsArgumentsIncrementally) {
  auto parser = make_hermes_tool_parser();
  auto stream = parser->start(nullptr);
  EXPECT_TRUE(stream->feed("<tool_call>{\"name\": \"get_weather\", ").calls.empty());
  auto d = stream->feed("\"arguments\": {");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_FALSE(d.calls[0].id.empty());
  EXPECT_EQ(d.calls[0].arguments, "{");
  d = stream->feed("\"city\":\"Par");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "\"city\": \"Par");
  EXPECT_TRUE(d.calls[0].id.empty());
  d = stream->feed("is\", \"days\": 1");  // a number may go on: held
  EXPECT_EQ(d.calls[0].arguments, "is\"");
  d = stream->feed("0}}</tool_call>");
  EXPECT_EQ(d.calls[0].arguments, ", \"days\": 10}");
  EXPECT_TRUE(stream->finish().calls.empty());
}

}  // namespace
}  // namespace pagoda::openai
