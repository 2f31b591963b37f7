// The llama3_json format: {"name": ..., "parameters": {...}}; ... .
#include "tool_parser_testing.h"

namespace pagoda::openai {
namespace {

using testing::check_splits;
using testing::json;

TEST(Llama3ToolParser, Formats) {
  auto parser = make_llama3_json_tool_parser();
  check_splits(*parser, "The answer is 4.", {"The answer is 4.", {}});
  check_splits(*parser, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
               {"", {{"get_weather", json{{"city", "Oslo"}}}}});
  check_splits(*parser, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": [1, 2]}}",
               {"", {{"f", json{{"a", {1, 2}}}}}});
  check_splits(
      *parser,
      " {\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"arguments\": {\"s\": \"}{\"}}",
      {"", {{"f", json::object()}, {"g", json{{"s", "}{"}}}}});
  check_splits(*parser, "{\"name\": \"f\", \"parameters\": {\"x\": 1}} Done.",
               {"Done.", {{"f", json{{"x", 1}}}}});
  // JSON that is not a call, and broken JSON before the name, stay content.
  check_splits(*parser, "{\"answer\": 42}", {"{\"answer\": 42}", {}});
  check_splits(*parser, "{\"name\": 3, \"parameters\": {}}",
               {"{\"name\": 3, \"parameters\": {}}", {}});
  check_splits(*parser, "{\"nam", {"{\"nam", {}});
  check_splits(*parser, "<|python", {"<|python", {}});
  // Cut off inside the arguments: closed where the output ended.
  check_splits(*parser, "{\"name\": \"f\", \"parameters\": {", {"", {{"f", json::object()}}});
  check_splits(*parser, "{\"name\": \"f\", \"parameters\": {\"a\": [1, \"x",
               {"", {{"f", json{{"a", {1, "x"}}}}}});
}

TEST(Llama3ToolParser, StreamsPlainTextAtOnce) {
  auto parser = make_llama3_json_tool_parser();
  auto stream = parser->start(nullptr);
  EXPECT_EQ(stream->feed("  ").content, "");
  EXPECT_EQ(stream->feed("Hi").content, "  Hi");
  EXPECT_EQ(stream->feed(" there").content, " there");
}

}  // namespace
}  // namespace pagoda::openai
