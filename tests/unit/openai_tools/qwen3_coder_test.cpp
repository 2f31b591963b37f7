// The qwen3_coder format: <tool_call><function=f><parameter=p>v</parameter></function></tool_call>,
// values typed by the request's tool schemas.
#include "tool_parser_testing.h"

namespace pagoda::openai {
namespace {

using testing::check_splits;
using testing::json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                   "temp": {"type": "number"}, "metric": {"type": "boolean"},
                   "opts": {"type": "object"}, "tags": {"type": "array"},
                   "maybe": {"type": ["null", "integer"]}, "any": {}}}}},
  {"type": "function", "function": {"name": "no_schema"}}
])");

void check(const ToolParser& parser, const std::string& text, const testing::Expected& want) {
  check_splits(parser, text, want, kTools);
}

TEST(Qwen3CoderToolParser, Formats) {
  auto parser = make_qwen3_coder_tool_parser();
  check(*parser, "No tools needed.", {"No tools needed.", {}});
  check(*parser,
        "Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n"
        "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        {"Let me look.", {{"get_weather", json{{"city", "San Francisco"}, {"days", 3}}}}});
  // Typed by the schema, as vLLM does.
  check(*parser,
        "<tool_call><function=get_weather><parameter=city>42</parameter><parameter=days>x1"
        "</parameter><parameter=temp>21.0</parameter><parameter=metric>True</parameter>"
        "<parameter=opts>{\"a\": [1, null]}</parameter><parameter=tags>['x', 'y']</parameter>"
        "<parameter=maybe>7</parameter><parameter=any>None</parameter>"
        "<parameter=unknown>5</parameter></function></tool_call>",
        {"",
         {{"get_weather", json{{"city", "42"},
                               {"days", "x1"},
                               {"temp", 21},
                               {"metric", true},
                               {"opts", json{{"a", json::array({1, nullptr})}}},
                               {"tags", json::array({"x", "y"})},
                               {"maybe", 7},
                               {"any", "None"},
                               {"unknown", "5"}}}}});
  check(*parser,
        "<tool_call><function=get_weather><parameter=temp>2.5</parameter><parameter=city>null"
        "</parameter></function></tool_call><tool_call><function=no_schema><parameter=q>"
        "multi\nline <b>text</b>\n</parameter></function></tool_call>",
        {"",
         {{"get_weather", json{{"temp", 2.5}, {"city", nullptr}}},
          {"no_schema", json{{"q", "multi\nline <b>text</b>"}}}}});
  // A missing </parameter> ends at the next tag; no parameters: {}.
  check(
      *parser,
      "<tool_call><function=get_weather><parameter=city>Oslo<parameter=days>2</function>"
      "</tool_call><tool_call><function=no_schema></function></tool_call>",
      {"", {{"get_weather", json{{"city", "Oslo"}, {"days", 2}}}, {"no_schema", json::object()}}});
  // Cut off: the value so far counts, and the call is closed.
  check(*parser, "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
        {"", {{"get_weather", json{{"city", "Par"}}}}});
  check(*parser, "<tool_call>\n<function=get_weather>", {"", {{"get_weather", json::object()}}});
  // Not a call before the function name is complete: content.
  check(*parser, "<tool_call>{\"name\": \"x\"}</tool_call>",
        {"<tool_call>{\"name\": \"x\"}</tool_call>", {}});
  check(*parser, "<tool_call><function=get_wea", {"<tool_call><function=get_wea", {}});
}

}  // namespace
}  // namespace pagoda::openai
