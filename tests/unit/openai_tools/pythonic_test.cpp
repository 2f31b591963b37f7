// The pythonic format: [f(a=1, b="x"), g()].
#include "tool_parser_testing.h"

namespace pagoda::openai {
namespace {

using testing::check_splits;
using testing::json;

TEST(PythonicToolParser, Formats) {
  auto parser = make_pythonic_tool_parser();
  check_splits(*parser, "The weather is nice.", {"The weather is nice.", {}});
  check_splits(
      *parser, "[get_weather(city=\"SF\", unit='c'), other(x=1)]",
      {"", {{"get_weather", json{{"city", "SF"}, {"unit", "c"}}}, {"other", json{{"x", 1}}}}});
  check_splits(*parser,
               "[f(s='it\\'s \"q\" \\n\\u00e9', n=-2.5, e=1e3, t=True, f=False, z=None, "
               "l=[1, (2, 3), []], d={'k': {\"n\": [None]}}, big=12345678901234567890)]",
               {"",
                {{"f", json{{"s", "it's \"q\" \né"},
                            {"n", -2.5},
                            {"e", 1000.0},
                            {"t", true},
                            {"f", false},
                            {"z", nullptr},
                            {"l", json::array({1, json::array({2, 3}), json::array()})},
                            {"d", json{{"k", json{{"n", json::array({nullptr})}}}}},
                            {"big", 12345678901234567890.0}}}}});
  check_splits(*parser, "[noargs(), dotted.name(a='''tri\nple''')]",
               {"", {{"noargs", json::object()}, {"dotted.name", json{{"a", "tri\nple"}}}}});
  check_splits(*parser, "<|python_start|>[f(x=1)]<|python_end|>", {"", {{"f", json{{"x", 1}}}}});
  check_splits(*parser, "  [f(x=1,)]  Done", {"Done", {{"f", json{{"x", 1}}}}});
  // Lists that are not calls are content.
  check_splits(*parser, "[1, 2, 3] are numbers", {"[1, 2, 3] are numbers", {}});
  check_splits(*parser, "[citation needed]", {"[citation needed]", {}});
  check_splits(*parser, "[]", {"[]", {}});
  check_splits(*parser, "[get_wea", {"[get_wea", {}});
  // Cut off, or invalid after the call started: closed, the rest dropped.
  check_splits(*parser, "[f(a=1, b='xy", {"", {{"f", json{{"a", 1}}}}});
  check_splits(*parser, "[f(a=1, b=12", {"", {{"f", json{{"a", 1}, {"b", 12}}}}});
  check_splits(*parser, "[f(a=1, b=unknown_name)] tail", {"", {{"f", json{{"a", 1}}}}});
  check_splits(*parser, "[f(1)]", {"", {{"f", json::object()}}});
}

TEST(PythonicToolParser, StreamsOneArgumentAtATime) {
  auto parser = make_pythonic_tool_parser();
  auto stream = parser->start(nullptr);
  EXPECT_TRUE(stream->feed("[get_weather").calls.empty());
  auto d = stream->feed("(city='Paris'");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, "{");  // the value may go on until , or )
  d = stream->feed(", days=3");
  EXPECT_EQ(d.calls[0].arguments, "\"city\": \"Paris\"");
  d = stream->feed(")]");
  EXPECT_EQ(d.calls[0].arguments, ", \"days\": 3}");
}

}  // namespace
}  // namespace pagoda::openai
