// Python's repr/str of values and json.dumps, checked against strings that
// CPython 3.11 prints for the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "jinja/json_value.h"
#include "jinja/value.h"

namespace pagoda::jinja {
namespace {

TEST(FloatRepr, MatchesPython) {
  const std::pair<double, const char*> cases[] = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {0.1, "0.1"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {1e+16, "1e+16"},
      {1000000000000000.0, "1000000000000000.0"},
      {1.2345678901234568e+17, "1.2345678901234568e+17"},
      {1.5e+300, "1.5e+300"},
      {5e-324, "5e-324"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      {2.5, "2.5"},
      {100.0, "100.0"},
      {1e+22, "1e+22"},
      {0.3333333333333333, "0.3333333333333333"},
      {123.456, "123.456"},
      {-2.5e-10, "-2.5e-10"},
      {9007199254740992.0, "9007199254740992.0"},
      {0.30000000000000004, "0.30000000000000004"},
      {1234567890123456.8, "1234567890123456.8"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"},
      {std::nan(""), "nan"},
  };
  for (const auto& [value, expected] : cases) EXPECT_EQ(float_repr(value), expected) << expected;
}

TEST(StringRepr, MatchesPython) {
  const std::pair<const char*, const char*> cases[] = {
      {"it's", "\"it's\""},
      {"say \"hi\"", "'say \"hi\"'"},
      {"both ' and \"", "'both \\' and \"'"},
      {"tab\there\nnl\r", "'tab\\there\\nnl\\r'"},
      {"\x1f\x7f\xc2\x80", "'\\x1f\\x7f\\x80'"},
      {"\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x99\x82",
       "'\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x99\x82'"},
      {"\xe2\x80\x8b\xc2\xa0\xe2\x80\xa8", "'\\u200b\\xa0\\u2028'"},
      {"back\\slash", "'back\\\\slash'"},
  };
  for (const auto& [value, expected] : cases) EXPECT_EQ(repr_string(value), expected) << value;
  EXPECT_EQ(repr_string(std::string("\0", 1)), "'\\x00'");
}

TEST(ValueStr, ContainersPrintLikePython) {
  Dict d;
  d.set(Value::string("k"), Value::list({Value::integer(1), Value::none(), Value::boolean(true)}));
  d.set(Value::integer(2), Value::tuple({Value::floating(1.0)}));
  EXPECT_EQ(to_str(Value::dict(d)), "{'k': [1, None, True], 2: (1.0,)}");
  EXPECT_EQ(to_str(Value::tuple({})), "()");
  EXPECT_EQ(to_str(Value::none()), "None");
  EXPECT_EQ(to_str(Value::undefined("x")), "");
  EXPECT_EQ(repr(Value::list({Value::undefined("x"), Value::string("a", true)})),
            "[Undefined, Markup('a')]");
}

TEST(PyEqual, NumbersCompareAcrossTypes) {
  EXPECT_TRUE(py_equal(Value::integer(1), Value::floating(1.0)));
  EXPECT_TRUE(py_equal(Value::integer(1), Value::boolean(true)));
  EXPECT_FALSE(py_equal(Value::integer(9007199254740993), Value::floating(9007199254740992.0)));
  EXPECT_FALSE(py_equal(Value::list({}), Value::tuple({})));
  EXPECT_TRUE(py_equal(Value::undefined("a"), Value::undefined("b")));
}

Value sample() {
  Dict inner;
  inner.set(Value::string("x"), Value::integer(1));
  Dict d;
  d.set(Value::string("a"), Value::list({Value::integer(1), Value::floating(2.5), Value::none(),
                                         Value::boolean(true), Value::string("\xc3\xa9\"")}));
  d.set(Value::string("b"), Value::dict({}));
  d.set(Value::string("c"), Value::list({}));
  d.set(Value::string("d"), Value::dict(inner));
  return Value::dict(d);
}

TEST(JsonDumps, MatchesPython) {
  JsonDumpOptions plain;
  EXPECT_EQ(
      json_dumps(sample(), plain),
      "{\"a\": [1, 2.5, null, true, \"\xc3\xa9\\\"\"], \"b\": {}, \"c\": [], \"d\": {\"x\": 1}}");
  JsonDumpOptions indented;
  indented.has_indent = true;
  indented.indent = "  ";
  indented.item_separator = ",";
  EXPECT_EQ(json_dumps(sample(), indented),
            "{\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true,\n    \"\xc3\xa9\\\"\"\n  ],\n"
            "  \"b\": {},\n  \"c\": [],\n  \"d\": {\n    \"x\": 1\n  }\n}");
  JsonDumpOptions compact;
  compact.ensure_ascii = true;
  compact.item_separator = ",";
  compact.key_separator = ":";
  compact.sort_keys = true;
  EXPECT_EQ(json_dumps(sample(), compact),
            "{\"a\":[1,2.5,null,true,\"\\u00e9\\\"\"],\"b\":{},\"c\":[],\"d\":{\"x\":1}}");
  EXPECT_EQ(
      json_dumps(Value::list({Value::string("\x01\x7f\xe2\x80\xa8\xf0\x9f\x99\x82")}), compact),
      "[\"\\u0001\\u007f\\u2028\\ud83d\\ude42\"]");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(
      json_dumps(Value::list({Value::floating(inf), Value::floating(std::nan("")),
                              Value::floating(-inf), Value::floating(1e-7), Value::floating(1e16)}),
                 plain),
      "[Infinity, NaN, -Infinity, 1e-07, 1e+16]");
}

}  // namespace
}  // namespace pagoda::jinja
