// The mistral format: [TOOL_CALLS] then a JSON list, or name{...} / name[ARGS]{...}.
#include "tool_parser_testing.h"

namespace pagoda::openai {
namespace {

using testing::check_splits;
using testing::json;

bool mistral_id(const std::string& id) {
  return id.size() == 9 &&
         std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isalnum(c); });
}

void check(const ToolParser& parser, const std::string& text, const testing::Expected& want) {
  check_splits(parser, text, want, json(), mistral_id);
}

TEST(MistralToolParser, Formats) {
  auto parser = make_mistral_tool_parser();
  check(*parser, "This is a test", {"This is a test", {}});
  // Before v11: a JSON list.
  check(*parser, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\":{\"a\": 3.5, \"b\": 4}}]",
        {"", {{"add", json{{"a", 3.5}, {"b", 4}}}}});
  check(*parser,
        "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 3.5, \"b\": 4}}, {\"name\": "
        "\"get_current_weather\", \"arguments\":{\"city\": \"San Francisco\", \"unit\": "
        "\"celsius\"}}]",
        {"",
         {{"add", json{{"a", 3.5}, {"b", 4}}},
          {"get_current_weather", json{{"city", "San Francisco"}, {"unit", "celsius"}}}}});
  check(*parser, "Hello[TOOL_CALLS] [{\"name\": \"add\", \"arguments\":{\"a\": 1, \"b\": 2}}]",
        {"Hello", {{"add", json{{"a", 1}, {"b", 2}}}}});
  check(*parser, "[TOOL_CALLS] [{\"arguments\":{\"name\": \"John Doe\"}, \"name\": \"get_age\"}]",
        {"", {{"get_age", json{{"name", "John Doe"}}}}});
  // v11: name{args}, one [TOOL_CALLS] per call.
  check(*parser, "[TOOL_CALLS]add_this_and_that{\"a\": 3.5, \"b\": 4}",
        {"", {{"add_this_and_that", json{{"a", 3.5}, {"b", 4}}}}});
  check(*parser, "[TOOL_CALLS]add{\"a\": 3.5, \"b\": 4}[TOOL_CALLS]multiply{\"a\": 3, \"b\": 6}",
        {"", {{"add", json{{"a", 3.5}, {"b", 4}}}, {"multiply", json{{"a", 3}, {"b", 6}}}}});
  check(*parser,
        "hi{hi[TOOL_CALLS]bash{\"command\": \"print(\\\"hello world!\\\")\\nre.compile(r'{}')\"}",
        {"hi{hi", {{"bash", json{{"command", "print(\"hello world!\")\nre.compile(r'{}')"}}}}});
  // v13: name[ARGS]{args}.
  check(*parser, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]noop[ARGS]{}",
        {"", {{"get_weather", json{{"city", "Paris"}}}, {"noop", json::object()}}});
  // One object after the token.
  check(*parser, "[TOOL_CALLS] {\"name\": \"f\", \"arguments\": {\"x\": [1]}}",
        {"", {{"f", json{{"x", {1}}}}}});
  // Not calls: content, unchanged.
  check(*parser, "[TOOL_CALLS] not json at all", {"[TOOL_CALLS] not json at all", {}});
  check(*parser, "[TOOL_CALLS]toolname_no_args", {"[TOOL_CALLS]toolname_no_args", {}});
  check(*parser, "[TOOL_CALLS][{\"x\": 1}]", {"[TOOL_CALLS][{\"x\": 1}]", {}});
  check(*parser, "a [TOOL_CA", {"a [TOOL_CA", {}});
  // Cut off: closed where the output ended.
  check(*parser, "[TOOL_CALLS]f[ARGS]{\"a\": {\"b\": \"c",
        {"", {{"f", json{{"a", {{"b", "c"}}}}}}});
}

}  // namespace
}  // namespace pagoda::openai
