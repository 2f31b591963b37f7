// Python literals as JSON values (pythonic calls, qwen3_coder's untyped values).
#include "openai/tools/python_literal.h"

#include <gtest/gtest.h>

namespace pagoda::openai {
namespace {

TEST(PythonLiteral, Values) {
  EXPECT_EQ(parse_python_literal("'a\\'b'"), Json("a'b"));
  EXPECT_EQ(parse_python_literal("\"\\x41\\u00e9\\U0001F600\""), Json("Aé😀"));
  EXPECT_EQ(parse_python_literal("'''x\n'y'''"), Json("x\n'y"));
  EXPECT_EQ(parse_python_literal("'\\d'"), Json("\\d"));  // unknown escapes stay
  EXPECT_EQ(parse_python_literal("-17"), Json(-17));
  EXPECT_EQ(parse_python_literal("1_000"), Json(1000));
  EXPECT_EQ(parse_python_literal("2.5e-1"), Json(0.25));
  EXPECT_EQ(parse_python_literal("1."), Json(1.0));
  EXPECT_EQ(parse_python_literal(" [True, False, None, (1,), {'k': [2]}] "),
            Json::parse(R"([true, false, null, [1], {"k": [2]}])"));
  for (const char* bad : {"name", "[1, 2", "{1: 2}", "'unterminated", "1 2", "inf", "f(x)"}) {
    EXPECT_FALSE(parse_python_literal(bad).has_value()) << bad;
  }
}

TEST(PythonLiteral, IncompleteWhileTheTextMayGrow) {
  for (const char* partial : {"'abc", "[1, 2", "12", "Tru", "{'a': ", "'''x''", "''"}) {
    PythonCursor cursor(partial);
    Json value;
    EXPECT_EQ(cursor.literal(value), PyRead::kIncomplete) << partial;
  }
  PythonCursor cursor("Nonsense ");
  Json value;
  EXPECT_EQ(cursor.literal(value), PyRead::kError);
}

}  // namespace
}  // namespace pagoda::openai
