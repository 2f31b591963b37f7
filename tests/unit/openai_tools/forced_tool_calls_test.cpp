// Tool calls read back from output constrained by tool_choice: "required"'s
// array of {"name", "parameters"} objects and a named function's arguments.
#include "openai/tools/forced_tool_calls.h"

#include "tool_parser_testing.h"

namespace pagoda::openai {
namespace {

using testing::check_splits;
using testing::json;

TEST(RequiredToolCalls, ArrayOfCalls) {
  auto parser = make_required_tool_call_parser();
  check_splits(*parser, R"([{"name": "get_weather", "parameters": {"city": "Paris"}}])",
               {"", {{"get_weather", json{{"city", "Paris"}}}}});
  check_splits(*parser,
               "[\n  {\"name\": \"f\", \"parameters\": {}},\n  {\"name\": \"g\", \"parameters\": "
               "{\"a\": [1, {\"b\": null}]}}\n]",
               {"", {{"f", json::object()}, {"g", json{{"a", {1, {{"b", nullptr}}}}}}}});
  // Any key order (read whole, announced at the object's end).
  check_splits(*parser, R"([{"parameters": {"x": 1}, "name": "f"}])",
               {"", {{"f", json{{"x", 1}}}}});
  // Cut off by max_tokens: the call in progress is closed.
  check_splits(*parser, R"([{"name": "f", "parameters": {"x": [1, "ab)",
               {"", {{"f", json{{"x", {1, "ab"}}}}}});
  check_splits(*parser, "[", {"", {}});
}

TEST(RequiredToolCalls, TextTheConstraintExcludesIsContent) {
  auto parser = make_required_tool_call_parser();
  check_splits(*parser, "Hello there", {"Hello there", {}});
  check_splits(*parser, R"(<tool_call>{"name": "f", "arguments": {}}</tool_call>)",
               {R"(<tool_call>{"name": "f", "arguments": {}}</tool_call>)", {}});
  check_splits(*parser, R"([{"name": "f", "parameters": {}}] trailing)",
               {"trailing", {{"f", json::object()}}});
  check_splits(*parser, R"([{"name": "f", "parameters": {}} oops)",
               {"oops", {{"f", json::object()}}});
}

TEST(NamedToolCall, TheWholeOutputIsTheArguments) {
  auto parser = make_named_tool_call_parser("get_weather");
  check_splits(*parser, R"({"city": "Paris", "days": [1, 2]})",
               {"", {{"get_weather", json{{"city", "Paris"}, {"days", {1, 2}}}}}});
  check_splits(*parser, "  {}\n", {"", {{"get_weather", json::object()}}});
  // Cut off: closed where it stopped; nothing at all reads as {}.
  check_splits(*parser, R"({"city": "Par)", {"", {{"get_weather", json{{"city", "Par"}}}}});
  check_splits(*parser, "", {"", {{"get_weather", json::object()}}});
}

TEST(NamedToolCall, AnnouncedAtTheFirstPiece) {
  auto parser = make_named_tool_call_parser("f");
  auto stream = parser->start(nullptr);
  ToolStreamDelta first = stream->feed("{\"a\"");
  ASSERT_EQ(first.calls.size(), 1u);
  EXPECT_EQ(first.calls[0].name, "f");
  EXPECT_FALSE(first.calls[0].id.empty());
  ToolStreamDelta rest = stream->feed(": 1}");
  rest.append(stream->finish());
  ASSERT_EQ(rest.calls.size(), 1u);
  EXPECT_TRUE(rest.calls[0].id.empty());
  EXPECT_EQ(first.calls[0].arguments + rest.calls[0].arguments, "{\"a\": 1}");
}

}  // namespace
}  // namespace pagoda::openai
