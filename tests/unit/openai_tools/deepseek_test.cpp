// The deepseek_v3 format (and V3.1's spelling).
#include "tool_parser_testing.h"

namespace pagoda::openai {
namespace {

using testing::check_splits;
using testing::json;

const std::string kBegin = "<｜tool▁calls▁begin｜>";
const std::string kEnd = "<｜tool▁calls▁end｜>";
const std::string kCall = "<｜tool▁call▁begin｜>";
const std::string kCallEnd = "<｜tool▁call▁end｜>";
const std::string kSep = "<｜tool▁sep｜>";

TEST(DeepSeekToolParser, V3) {
  auto parser = make_deepseek_v3_tool_parser();
  EXPECT_STREQ(parser->name(), "deepseek_v3");
  check_splits(*parser, "Plain answer.", {"Plain answer.", {}});
  check_splits(
      *parser,
      "Checking." + kBegin + kCall + "function" + kSep + "get_weather\n```json\n" +
          "{\"city\": \"Paris\", \"days\": [1, 2]}\n```" + kCallEnd + kCall + "function" + kSep +
          "noop\n```json\n{}\n```" + kCallEnd + kEnd + " Done.",
      {"Checking. Done.",
       {{"get_weather", json{{"city", "Paris"}, {"days", {1, 2}}}}, {"noop", json::object()}}});
  // Cut off inside the arguments.
  check_splits(*parser, kBegin + kCall + "function" + kSep + "f\n```json\n{\"q\": \"abc",
               {"", {{"f", json{{"q", "abc"}}}}});
  // Not a call: content.
  check_splits(*parser, kBegin + "oops", {kBegin + "oops", {}});
  check_splits(*parser, kBegin + kCall + "function" + kSep + "f\nno fence",
               {kBegin + kCall + "function" + kSep + "f\nno fence", {}});
  check_splits(*parser, "x <｜tool▁ca", {"x <｜tool▁ca", {}});
}

TEST(DeepSeekToolParser, V31) {
  auto parser = make_tool_parser("deepseek_v31").value();
  EXPECT_STREQ(parser->name(), "deepseek_v31");
  check_splits(*parser,
               kBegin + kCall + "get_weather" + kSep + "{\"city\": \"Oslo\"}" + kCallEnd + kCall +
                   "b" + kSep + "{}" + kCallEnd + kEnd,
               {"", {{"get_weather", json{{"city", "Oslo"}}}, {"b", json::object()}}});
}

}  // namespace
}  // namespace pagoda::openai
