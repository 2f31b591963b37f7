// JSON Schema -> GBNF, end to end: each schema's grammar is parsed with
// parse_gbnf and run over JSON texts written by hand that the schema must
// accept or reject; number bounds and dates are checked exhaustively against
// arithmetic; every error message is checked word for word.
#include "grammar/json_schema_to_gbnf.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"

namespace pagoda::grammar {
namespace {

std::shared_ptr<const Grammar> compile(std::string_view schema) {
  auto gbnf = json_schema_to_gbnf(schema);
  EXPECT_TRUE(gbnf.ok()) << schema << "\n" << (gbnf.ok() ? "" : gbnf.error().message);
  if (!gbnf.ok()) return nullptr;
  auto grammar = parse_gbnf_shared(*gbnf);
  EXPECT_TRUE(grammar.ok()) << (grammar.ok() ? "" : grammar.error().message) << "\n" << *gbnf;
  return grammar.ok() ? *grammar : nullptr;
}

struct Case {
  const char* name;
  const char* schema;
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

void check(const Case& c) {
  SCOPED_TRACE(c.name);
  auto g = compile(c.schema);
  ASSERT_TRUE(g);
  for (const std::string& text : c.valid)
    EXPECT_TRUE(grammar_matches(g, text)) << "valid: " << text;
  for (const std::string& text : c.invalid)
    EXPECT_FALSE(grammar_matches(g, text)) << "invalid: " << text;
}

std::string error_of(std::string_view schema) {
  auto gbnf = json_schema_to_gbnf(schema);
  return gbnf.ok() ? "(no error)" : gbnf.error().message;
}

TEST(JsonSchemaToGbnf, Primitives) {
  check({"string",
         R"({"type": "string"})",
         {R"("")", R"("abc")", R"("a\"b\\c\/\b\f\n\r\t")", R"("\u00e9\uD83D\uDE00")",
          "\"h\xC3\xA9llo \xF0\x9F\x98\x80\""},
         {R"(abc)", R"("a)", "\"a\nb\"", "\"\x01\"", R"("\x41")", R"("\uD800")", R"("\uDC00x")",
          "\"\xC3\"", "\"\xED\xA0\x80\"", R"("a" )", R"( "a")"}});
  check({"integer",
         R"({"type": "integer"})",
         {"0", "-0", "7", "-12", "1234567890123456"},
         {"01", "1.0", "1e3", "+1", "-", "12345678901234567", ""}});
  check({"number",
         R"({"type": "number"})",
         {"0", "-0.5", "3.25", "1e10", "2.5E-3", "-1e+2"},
         {".5", "1.", "01", "1e", "--1", "NaN"}});
  check({"boolean", R"({"type": "boolean"})", {"true", "false"}, {"True", "1", "null"}});
  check({"null", R"({"type": "null"})", {"null"}, {"nil", "\"null\""}});
  check({"type array", R"({"type": ["string", "null"]})", {"\"x\"", "null"}, {"1", "true"}});
  // OpenAPI's nullable is no JSON Schema keyword: ignored like any unknown
  // keyword, so null is not generated (a JSON Schema validator would reject it).
  check({"nullable", R"({"type": "integer", "nullable": true})", {"1"}, {"null"}});
  check({"integer and number", R"({"type": ["integer", "number"]})", {"1", "1.5"}, {"\"1\""}});
}

TEST(JsonSchemaToGbnf, LargeEnumsSharingPrefixes) {
  // 4096 values (2048 strings, 2048 numbers) with long common prefixes: the alternatives are
  // factored by prefix, so the matcher (which follows a bounded number of parses) admits every one
  // of them, and nothing else.
  std::string schema = R"({"enum": [)";
  for (int i = 0; i < 2048; ++i)
    schema += fmt::format("{}\"item-{:04}\", {}", i ? "," : "", i * 2, i * 2 + 1000000);
  auto g = compile(schema + "]}");
  ASSERT_TRUE(g);
  for (int i = 0; i < 4096; ++i) {
    EXPECT_EQ(grammar_matches(g, fmt::format("\"item-{:04}\"", i)), i % 2 == 0) << i;
    EXPECT_EQ(grammar_matches(g, std::to_string(i + 1000000)), i % 2 == 0) << i;
  }
  check({"prefixes of each other",
         R"({"enum": ["a", "ab", "abc", "b", "\u00e9", "\u00e8", 1, 12, 123]})",
         {R"("a")", R"("ab")", R"("abc")", R"("b")", "\"\xC3\xA9\"", "\"\xC3\xA8\"", "1", "12",
          "123"},
         {R"("abcd")", R"("")", "\"\xC3\"", "1234", "2"}});
  std::string chain = R"({"enum": [)";  // "x", "xx", ... nests 300 groups deep
  for (int i = 1; i <= 300; ++i)
    chain += fmt::format("{}\"{}\"", i > 1 ? "," : "", std::string(i, 'x'));
  auto g2 = compile(chain + "]}");
  ASSERT_TRUE(g2);
  EXPECT_TRUE(grammar_matches(g2, "\"" + std::string(300, 'x') + "\""));
  EXPECT_TRUE(grammar_matches(g2, "\"" + std::string(150, 'x') + "\""));
  EXPECT_FALSE(grammar_matches(g2, "\"" + std::string(301, 'x') + "\""));
}

TEST(JsonSchemaToGbnf, AnyValue) {
  for (const char* schema : {"{}", "true", R"({"description": "anything", "title": "t"})"}) {
    check({"any",
           schema,
           {"1", "\"s\"", "null", "[]", R"({"a": [1, {"b": null}], "c": "d"})", "[1, 2,\n  3]"},
           {"", "{", "[1,]", "nul"}});
  }
}

TEST(JsonSchemaToGbnf, JsonObjectGrammar) {
  auto g = parse_gbnf_shared(json_object_gbnf());
  ASSERT_TRUE(g.ok()) << g.error().message;
  for (const char* yes :
       {"{}", R"({"a": 1, "b": [true, null, {"c": "d"}]})", "{\n  \"x\": -1.5e3\n}"})
    EXPECT_TRUE(grammar_matches(*g, yes)) << yes;
  for (const char* no : {"[]", "1", "\"s\"", R"({"a": 1,})", R"({"a" 1})", " {}"})
    EXPECT_FALSE(grammar_matches(*g, no)) << no;
}

TEST(JsonSchemaToGbnf, Whitespace) {
  check({"ws policy",
         R"({"type": "array", "items": {"type": "integer"}})",
         {"[]", "[ ]", "[1,2]", "[1, 2]", "[\n  1,\n  2\n]", "[\n\t\t1\n]",
          "[\n" + std::string(20, ' ') + "1]"},
         {"[  1]", "[1 ,  2]", "[\n" + std::string(21, ' ') + "1]", "[\n\n1]", "[1]\n", " [1]"}});
}

TEST(JsonSchemaToGbnf, ObjectProperties) {
  const char* schema = R"({"type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
    "required": ["b"]})";
  check({"order and optional",
         schema,
         {R"({"b": "x"})", R"({"a": 1, "b": "x"})", R"({"b": "x", "c": true})",
          R"({"a": 1, "b": "x", "c": false})", "{\n  \"a\": 1,\n  \"b\": \"x\"\n}"},
         {R"({})", R"({"a": 1})", R"({"b": "x", "a": 1})", R"({"b": "x", "d": 1})", R"({"b": 1})",
          R"({"b": "x",})", R"({, "b": "x"})", R"({"b": "x", "b": "y"})"}});
  check({"all optional",
         R"({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})",
         {"{}", R"({"a": 1})", R"({"b": 2})", R"({"a": 1, "b": 2})"},
         {R"({"b": 2, "a": 1})", R"({"a": 1,})", R"({"c": 1})", "[]"}});
  check({"all required",
         R"({"type": "object", "properties": {"x": {}, "y": {}}, "required": ["y", "x"]})",
         {R"({"x": 1, "y": [2]})"},
         {R"({"y": 2, "x": 1})", R"({"x": 1})", "{}"}});
  check({"escaped key",
         R"({"properties": {"a\"b": {"const": 1}, "é": {"const": 2}}, "required": ["a\"b"]})",
         {R"({"a\"b": 1})", "{\"a\\\"b\": 1, \"\xC3\xA9\": 2}"},
         {R"({"ab": 1})"}});
  check({"false property",
         R"({"properties": {"a": false, "b": {"type": "null"}}})",
         {"{}", R"({"b": null})"},
         {R"({"a": 1})"}});
  check({"required not in properties",
         R"({"type": "object", "required": ["id"]})",
         {R"({"id": 1})", R"({"id": "x", "other": 2})"},
         {"{}", R"({"other": 2})"}});
}

TEST(JsonSchemaToGbnf, AdditionalProperties) {
  check({"absent with properties: declared only",
         R"({"type": "object", "properties": {"a": {"type": "integer"}}})",
         {"{}", R"({"a": 1})"},
         {R"({"b": 1})", R"({"a": 1, "b": 1})"}});
  check({"absent without properties: any object",
         R"({"type": "object"})",
         {"{}", R"({"x": [1], "y": {"z": null}})"},
         {"[]", "null"}});
  check({"true",
         R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": true})",
         {R"({"a": 1, "b": "x", "c": [null]})", R"({"b": 1})", R"({"ab": 1, "": 2})"},
         {R"({"a": "x"})", R"({"b": 1, "a": 1})", R"({"a": 1, "a": 2})"}});
  check({"schema",
         R"({"properties": {"id": {"type": "string"}}, "required": ["id"],
                       "additionalProperties": {"type": "number"}})",
         {R"({"id": "x"})", R"({"id": "x", "w": 1.5, "h": 2})", R"({"id": "x", "i": 1, "idx": 2})"},
         {R"({"id": "x", "w": "1"})", R"({"id": "x", "id": 2})", R"({"w": 1})"}});
  check({"map",
         R"({"type": "object", "additionalProperties": {"type": "boolean"}})",
         {"{}", R"({"a": true, "b": false})"},
         {R"({"a": 1})"}});
  check({"false", R"({"type": "object", "additionalProperties": false})", {"{}"}, {R"({"a": 1})"}});
}

TEST(JsonSchemaToGbnf, Arrays) {
  check({"items and bounds",
         R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
         {"[1, 2]", "[1, 2, 3]"},
         {"[]", "[1]", "[1, 2, 3, 4]", "[1, \"2\"]"}});
  check({"min only",
         R"({"items": {"type": "null"}, "minItems": 1})",
         {"[null]", "[null, null, null, null]"},
         {"[]"}});
  check(
      {"no items: any values", R"({"type": "array"})", {"[]", R"([1, "a", [null], {}])"}, {"{}"}});
  check({"prefixItems closed",
         R"({"prefixItems": [{"type": "string"}, {"type": "integer"}]})",
         {"[]", R"(["a"])", R"(["a", 1])"},
         {R"(["a", 1, 2])", R"([1])", R"(["a", "b"])"}});
  check({"prefixItems then items",
         R"({"prefixItems": [{"const": "x"}], "items": {"type": "integer"}, "minItems": 2})",
         {R"(["x", 1])", R"(["x", 1, 2, 3])"},
         {R"(["x"])", R"([1, 1])", R"(["x", "y"])"}});
  check({"draft 4 tuple",
         R"({"items": [{"type": "integer"}, {"type": "string"}], "additionalItems": false})",
         {"[]", "[1]", R"([1, "a"])"},
         {R"([1, "a", 2])"}});
  check({"maxItems 0", R"({"type": "array", "maxItems": 0})", {"[]", "[ ]"}, {"[1]"}});
  check({"items false", R"({"type": "array", "items": false})", {"[]"}, {"[1]"}});
  check({"nested arrays",
         R"({"items": {"items": {"type": "integer"}, "maxItems": 2}})",
         {"[[], [1, 2], [3]]"},
         {"[[1, 2, 3]]", "[1]"}});
}

TEST(JsonSchemaToGbnf, StringLengths) {
  check({"minLength/maxLength",
         R"({"type": "string", "minLength": 2, "maxLength": 3})",
         {R"("ab")", R"("abc")", R"("\n\u00e9")", "\"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\"",
          R"("\uD83D\uDE00\uD83D\uDE00")"},
         {R"("a")", R"("abcd")", R"("")"}});
  check({"minLength only", R"({"minLength": 1})", {R"("a")", R"("abcdef")"}, {R"("")", "1"}});
}

TEST(JsonSchemaToGbnf, EnumAndConst) {
  check({"enum",
         R"({"enum": ["red", "green", 3, null, {"a": [1]}, true]})",
         {R"("red")", R"("green")", "3", "null", R"({"a":[1]})", "true"},
         {R"("blue")", "4", R"("3")", "false", R"({"a": [1]})"}});
  check({"enum with type",
         R"({"type": "string", "enum": ["a", 1, "b"]})",
         {R"("a")", R"("b")"},
         {"1"}});
  check({"const", R"({"const": "fixed"})", {R"("fixed")"}, {R"("other")"}});
  check({"const integer typed number", R"({"type": "number", "const": 2})", {"2"}, {"2.0"}});
}

TEST(JsonSchemaToGbnf, Unions) {
  check({"anyOf",
         R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})",
         {"1", R"("a")"},
         {R"("ab")", "null"}});
  check({"oneOf as anyOf",
         R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})",
         {"true", "null"},
         {"0"}});
  check({"anyOf with siblings distributes",
         R"({"type": "object", "properties": {"kind": {"type": "string"}},
          "required": ["kind"], "anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                          {"properties": {"b": {"type": "integer"}}, "required": ["b"]}]})",
         {R"({"kind": "x", "a": 1})", R"({"kind": "x", "b": 1})"},
         {R"({"kind": "x"})", R"({"a": 1})", R"({"kind": "x", "a": 1, "b": 1})"}});
  check({"pydantic optional",
         R"({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Note"})",
         {R"("x")", "null"},
         {"1"}});
}

TEST(JsonSchemaToGbnf, AllOf) {
  check({"merged objects",
         R"({"allOf": [
          {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
          {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
         {R"({"a": 1, "b": "x"})"},
         {R"({"a": 1})", R"({"b": "x"})", R"({"a": 1, "b": "x", "c": 1})"}});
  check({"merged bounds",
         R"({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 5}, {"minimum": 2}]})",
         {"2", "5"},
         {"1", "6"}});
  check({"same property merged",
         R"({"allOf": [{"properties": {"a": {"type": "integer", "minimum": 0}}},
                                               {"properties": {"a": {"maximum": 3}}}]})",
         {R"({"a": 0})", R"({"a": 3})", "{}"},
         {R"({"a": 4})", R"({"a": -1})"}});
  check({"enum intersection",
         R"({"allOf": [{"enum": ["a", "b", "c"]}, {"enum": ["b", "c", "d"]}]})",
         {R"("b")", R"("c")"},
         {R"("a")", R"("d")"}});
  check({"other additionalProperties false",
         R"({"allOf": [
          {"properties": {"a": {"type": "integer"}}, "additionalProperties": false},
          {"properties": {"b": {"type": "integer"}}}]})",
         {"{}", R"({"a": 1})"},
         {R"({"b": 1})"}});
  check({"$ref with siblings",
         R"({"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}}},
          "$ref": "#/$defs/base", "required": ["id"]})",
         {R"({"id": 1})"},
         {"{}"}});
}

TEST(JsonSchemaToGbnf, RefsAndRecursion) {
  check(
      {"tree",
       R"({"$defs": {"node": {"type": "object",
          "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
          "required": ["value", "children"]}}, "$ref": "#/$defs/node"})",
       {R"({"value": 1, "children": []})",
        R"({"value": 1, "children": [{"value": 2, "children": [{"value": 3, "children": []}]}]})"},
       {R"({"value": 1})", R"({"value": 1, "children": [{"value": 2}]})"}});
  check({"definitions and root ref",
         R"({"definitions": {"name": {"type": "string", "minLength": 1}},
          "type": "object", "properties": {"n": {"$ref": "#/definitions/name"},
                                           "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}})",
         {R"({"n": "a", "next": {"n": "b", "next": null}})", "{}"},
         {R"({"n": ""})", R"({"next": 1})"}});
  check({"shared definition used twice",
         R"({"$defs": {"p": {"type": "object", "properties": {"x": {"type": "number"}},
          "required": ["x"]}}, "type": "object", "properties": {"from": {"$ref": "#/$defs/p"}, "to": {"$ref": "#/$defs/p"}},
          "required": ["from", "to"]})",
         {R"({"from": {"x": 1}, "to": {"x": 2.5}})"},
         {R"({"from": {"x": 1}, "to": {}})"}});
  check({"recursion through a Pydantic v1 allOf wrapper",
         R"({"definitions": {"Node": {"type": "object",
          "properties": {"child": {"allOf": [{"$ref": "#/definitions/Node"}], "description": "next"}},
          "additionalProperties": false}}, "allOf": [{"$ref": "#/definitions/Node"}], "title": "Root"})",
         {"{}", R"({"child": {"child": {}}})"},
         {R"({"child": 1})"}});
  check({"linked list through anyOf",
         R"({"$defs": {"list": {"anyOf": [{"type": "null"},
          {"type": "object", "properties": {"head": {"type": "integer"}, "tail": {"$ref": "#/$defs/list"}},
           "required": ["head", "tail"]}]}}, "$ref": "#/$defs/list"})",
         {"null", R"({"head": 1, "tail": {"head": 2, "tail": null}})"},
         {R"({"head": 1})"}});
}

TEST(JsonSchemaToGbnf, IntegerBounds) {
  struct Bounds {
    const char* schema;
    int64_t lo, hi;  // inclusive
  };
  for (const Bounds& b : std::vector<Bounds>{
           {R"({"type": "integer", "minimum": 0, "maximum": 150})", 0, 150},
           {R"({"type": "integer", "minimum": -37, "maximum": 1234})", -37, 1234},
           {R"({"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 99})", -4, 98},
           {R"({"type": "integer", "minimum": 7.5, "maximum": 20.2})", 8, 20},
           {R"({"type": "integer", "minimum": -1000, "maximum": -999})", -1000, -999},
           {R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true, "maximum": 10})", 6, 10},
           {R"({"type": "integer", "minimum": 42})", 42, INT64_MAX},
           {R"({"type": "integer", "maximum": -3})", INT64_MIN, -3},
           {R"({"type": "integer", "minimum": 100, "maximum": 100})", 100, 100}}) {
    SCOPED_TRACE(b.schema);
    auto g = compile(b.schema);
    ASSERT_TRUE(g);
    for (int64_t v = -1500; v <= 1500; ++v)
      ASSERT_EQ(grammar_matches(g, std::to_string(v)), v >= b.lo && v <= b.hi) << v;
    EXPECT_EQ(grammar_matches(g, "123456789012"), b.hi == INT64_MAX);
    EXPECT_EQ(grammar_matches(g, "-123456789012"), b.lo == INT64_MIN);
    EXPECT_FALSE(grammar_matches(g, "-0"));
    EXPECT_FALSE(grammar_matches(g, "0100"));
  }
}

TEST(JsonSchemaToGbnf, NumberBounds) {
  struct Bounds {
    const char* schema;
    double lo, hi;
    bool lo_excl, hi_excl;
  };
  for (const Bounds& b : std::vector<Bounds>{
           {R"({"type": "number", "minimum": 0, "maximum": 1})", 0, 1, false, false},
           {R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})", 0, 1, true,
            true},
           {R"({"type": "number", "minimum": -12, "exclusiveMaximum": 3})", -12, 3, false, true},
           {R"({"type": "number", "exclusiveMinimum": -2, "maximum": -1})", -2, -1, true, false},
           {R"({"type": "number", "minimum": 5})", 5, INFINITY, false, false},
           {R"({"type": "number", "exclusiveMaximum": 0})", -INFINITY, 0, false, true},
           {R"({"type": "number", "minimum": 0, "exclusiveMinimum": 0})", 0, INFINITY, true,
            false}}) {
    SCOPED_TRACE(b.schema);
    auto g = compile(b.schema);
    ASSERT_TRUE(g);
    auto inside = [&](double v) {
      return (b.lo_excl ? v > b.lo : v >= b.lo) && (b.hi_excl ? v < b.hi : v <= b.hi);
    };
    for (int tenths = -200; tenths <= 200; ++tenths) {
      const double v = tenths / 10.0;
      const std::string whole = fmt::format("{}", tenths / 10);
      const std::string text = fmt::format("{}{}.{}", tenths < 0 ? "-" : "", std::abs(tenths) / 10,
                                           std::abs(tenths) % 10);
      ASSERT_EQ(grammar_matches(g, text), inside(v)) << text;
      if (tenths % 10 == 0) {
        ASSERT_EQ(grammar_matches(g, whole), inside(v)) << whole;
        ASSERT_EQ(grammar_matches(g, whole + ".000"), inside(v)) << whole << ".000";
      }
      const std::string hundredths = text + "01";  // v + 0.001 (or - for negatives)
      ASSERT_EQ(grammar_matches(g, hundredths),
                inside(tenths < 0 || text[0] == '-' ? v - 0.001 : v + 0.001))
          << hundredths;
    }
    EXPECT_FALSE(grammar_matches(g, "1e0"));  // bounded numbers are written without exponent
  }
}

// A decimal value n / 10^scale (the tests' exact reference arithmetic).
struct Scaled {
  __int128 n = 0;
  int scale = 0;
};

__int128 pow10(int e) {
  __int128 p = 1;
  while (e-- > 0) p *= 10;
  return p;
}

int compare(const Scaled& a, const Scaled& b) {
  const int scale = std::max(a.scale, b.scale);
  const __int128 x = a.n * pow10(scale - a.scale), y = b.n * pow10(scale - b.scale);
  return x < y ? -1 : x > y ? 1 : 0;
}

std::string digits_of(__int128 n) {  // n >= 0
  std::string out;
  do {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(n % 10)));
    n /= 10;
  } while (n > 0);
  return out;
}

// v as a JSON number without exponent and with exactly `scale` fraction
// digits ("-0.50" for -50 / 10^2).
std::string plain_text(const Scaled& v) {
  std::string digits = digits_of(v.n < 0 ? -v.n : v.n);
  const size_t width = static_cast<size_t>(v.scale) + 1;  // at least one integral digit
  if (digits.size() < width) digits = std::string(width - digits.size(), '0') + digits;
  const size_t num_integral = digits.size() - static_cast<size_t>(v.scale);
  std::string out = v.n < 0 ? "-" : "";
  out.append(digits, 0, num_integral);
  if (v.scale > 0) {
    out.push_back('.');
    out.append(digits, num_integral);
  }
  return out;
}

// v (v.n != 0) as a JSON number with an exponent: its digits with the point
// after `point` of them (0: "0.ddd"), e.g. 125 / 10^2 with point 1: "1.25e0".
std::string exponent_text(const Scaled& v, size_t point, bool upper) {
  const std::string digits = digits_of(v.n < 0 ? -v.n : v.n);
  point = std::min(point, digits.size());
  std::string mantissa = point == 0 ? "0." + digits
                         : point == digits.size()
                             ? digits
                             : digits.substr(0, point) + "." + digits.substr(point);
  const long exponent = static_cast<long>(digits.size() - point) - v.scale;
  return fmt::format("{}{}{}{}", v.n < 0 ? "-" : "", mantissa, upper ? "E" : "e", exponent);
}

TEST(JsonSchemaToGbnf, DecimalNumberBoundsRandom) {
  // Random decimal bounds, written plainly or with exponents, against values
  // near and between them, checked with exact decimal arithmetic: the grammar
  // accepts a value (no exponent, at most 16 fraction digits) exactly when it
  // lies within the bounds. Integers with the same bounds alike.
  std::mt19937_64 rng(17);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto random_decimal = [&] {
    const int scale = static_cast<int>(uniform(0, uniform(0, 3) == 0 ? 20 : 4));
    const int64_t magnitude = uniform(0, 3) == 0 ? 1000 : 30000;
    return Scaled{uniform(-magnitude, magnitude) * (uniform(0, 3) == 0 ? 1 : 7), scale};
  };
  auto bound_text = [&](const Scaled& v) {
    if (v.n == 0 || uniform(0, 2) == 0) return plain_text(v);
    return exponent_text(v, static_cast<size_t>(uniform(0, 6)), uniform(0, 1) == 1);
  };
  for (int round = 0; round < 200; ++round) {
    std::optional<Scaled> lo, hi;
    bool lo_excl = false, hi_excl = false;
    std::string keys;
    auto add_key = [&](const char* key, const Scaled& v) {
      keys += fmt::format(", \"{}\": {}", key, bound_text(v));
    };
    // One or two bounds per side; a side's effective bound is the tightest.
    for (int side = 0; side < 2; ++side) {
      const int64_t kind = uniform(0, 3);  // none, inclusive, exclusive, both
      for (int excl = 0; excl < 2; ++excl) {
        if (!(kind == 3 || kind == 1 + excl)) continue;
        const Scaled v = random_decimal();
        add_key(side == 0 ? (excl ? "exclusiveMinimum" : "minimum")
                          : (excl ? "exclusiveMaximum" : "maximum"),
                v);
        std::optional<Scaled>& b = side == 0 ? lo : hi;
        bool& b_excl = side == 0 ? lo_excl : hi_excl;
        const int c = b ? compare(v, *b) : 0;
        const bool tighter = !b || (side == 0 ? c > 0 : c < 0) || (c == 0 && excl);
        if (tighter) {
          b = v;
          b_excl = excl;
        }
      }
    }
    auto inside = [&](const Scaled& v) {
      if (lo && (lo_excl ? compare(v, *lo) <= 0 : compare(v, *lo) < 0)) return false;
      if (hi && (hi_excl ? compare(v, *hi) >= 0 : compare(v, *hi) > 0)) return false;
      return true;
    };
    // Values: each bound's value and neighbours at many scales, and random ones.
    std::vector<Scaled> values;
    for (const auto& b : {lo, hi}) {
      if (!b) continue;
      for (int scale = b->scale; scale <= std::max(b->scale, 17); ++scale) {
        const Scaled at{b->n * pow10(scale - b->scale), scale};
        for (int64_t d : {-11, -10, -1, 0, 1, 10, 11}) values.push_back({at.n + d, scale});
      }
    }
    for (int k = 0; k < 300; ++k) values.push_back(random_decimal());
    for (const char* type : {"number", "integer"}) {
      const std::string schema = fmt::format(R"({{"type": "{}"{}}})", type, keys);
      SCOPED_TRACE(schema);
      bool any_inside = false;
      std::vector<Scaled> checked;
      for (const Scaled& v : values) {
        if (std::string_view(type) == "integer") {
          // Only integers: the value rounded towards zero, written without fraction.
          checked.push_back({v.n / pow10(v.scale), 0});
        } else {
          checked.push_back(v);
        }
      }
      for (int64_t k = -300; k <= 300; ++k) checked.push_back({k, 0});
      for (const Scaled& v : checked) any_inside = any_inside || inside(v);
      auto gbnf = json_schema_to_gbnf(schema);
      if (!gbnf.ok()) {
        // Refused only as empty, and then no checked value lies inside.
        ASSERT_NE(gbnf.error().message.find("lies within the bounds"), std::string::npos)
            << gbnf.error().message;
        ASSERT_FALSE(any_inside);
        continue;
      }
      auto g = parse_gbnf_shared(*gbnf);
      ASSERT_TRUE(g.ok()) << g.error().message;
      for (const Scaled& v : checked) {
        const std::string text = plain_text(v);
        ASSERT_EQ(grammar_matches(*g, text), inside(v) && v.scale <= 16) << text;
      }
      if (lo || hi) {  // bounded numbers are written without exponent, never as "-0"
        EXPECT_FALSE(grammar_matches(*g, "1e0"));
        EXPECT_FALSE(grammar_matches(*g, "-0"));
      }
    }
  }
}

bool is_real_date(int y, unsigned m, unsigned d) {
  return y >= 1 && std::chrono::year_month_day(std::chrono::year(y), std::chrono::month(m),
                                               std::chrono::day(d))
                       .ok();
}

TEST(JsonSchemaToGbnf, DateFormatExhaustive) {
  auto g = compile(R"({"type": "string", "format": "date"})");
  ASSERT_TRUE(g);
  std::vector<int> years = {100, 200, 400, 800, 1900, 2000, 2100, 2400, 9996, 9999};
  for (int y = 0; y <= 120; ++y) years.push_back(y);
  for (int y = 1988; y <= 2032; ++y) years.push_back(y);
  for (int y : years) {
    for (unsigned m = 0; m <= 13; ++m) {
      for (unsigned d = 0; d <= 32; ++d) {
        const std::string text = fmt::format("\"{:04}-{:02}-{:02}\"", y, m, d);
        ASSERT_EQ(grammar_matches(g, text), is_real_date(y, m, d)) << text;
      }
    }
  }
  EXPECT_FALSE(grammar_matches(g, R"("2024-1-01")"));
}

TEST(JsonSchemaToGbnf, Formats) {
  check({"date-time",
         R"({"format": "date-time"})",
         {R"("2024-02-29T23:59:59Z")", R"("2023-01-01T00:00:00.123+05:30")",
          R"("1999-12-31T12:00:00-08:00")"},
         {R"("2023-02-29T00:00:00Z")", R"("2024-01-01T24:00:00Z")", R"("2024-01-01T00:00:00")",
          R"("2024-01-01 00:00:00Z")", R"("2024-01-01T00:60:00Z")"}});
  check({"time",
         R"({"format": "time"})",
         {R"("08:30:00Z")", R"("23:59:59.5-01:00")"},
         {R"("8:30:00Z")", R"("08:30Z")"}});
  check({"duration",
         R"({"format": "duration"})",
         {R"("P1Y2M3DT4H5M6S")", R"("PT36H")", R"("P4W")", R"("P1D")"},
         {R"("P")", R"("PT")", R"("P1H")", R"("1D")", R"("P1W2D")"}});
  check({"uuid",
         R"({"type": "string", "format": "uuid"})",
         {R"("123e4567-e89b-12d3-a456-426614174000")", R"("123E4567-E89B-12D3-A456-426614174000")"},
         {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400")",
          R"("g23e4567-e89b-12d3-a456-426614174000")"}});
  check({"email",
         R"({"format": "email"})",
         {R"("john.doe@example.com")", R"("a+b@mail.co.uk")", R"("x_y@a-b.io")"},
         {R"("john@localhost")", R"("@example.com")", R"("a..b@example.com")", R"("a@-x.com")",
          R"("a b@c.de")"}});
  check({"ipv4",
         R"({"format": "ipv4"})",
         {R"("192.168.0.1")", R"("0.0.0.0")", R"("255.255.255.255")"},
         {R"("256.1.1.1")", R"("1.2.3")", R"("01.2.3.4")", R"("1.2.3.4.5")"}});
  check({"ipv6",
         R"({"format": "ipv6"})",
         {R"("::1")", R"("::")", R"("2001:db8::8a2e:370:7334")",
          R"("2001:0db8:85a3:0000:0000:8a2e:0370:7334")", R"("::ffff:192.0.2.128")", R"("fe80::")"},
         {R"("2001:db8::8a2e::7334")", R"("12345::")", R"("1:2:3:4:5:6:7:8:9")", R"(":1")"}});
  check({"hostname",
         R"({"format": "hostname"})",
         {R"("example.com")", R"("a-b.c")", R"("localhost")"},
         {R"("-a.com")", R"("a-.com")", R"("a..b")", R"("a_b.com")",
          "\"" + std::string(64, 'a') + ".com\""}});
  check({"uri",
         R"({"format": "uri"})",
         {R"("https://example.com/a/b?x=1&y=%20#frag")", R"("mailto:john@example.com")",
          R"("urn:isbn:0451450523")", R"("http://[::1]:8080/")", R"("file:///etc/hosts")"},
         {R"("example.com")", R"("/relative/path")", R"("http://exa mple.com")", R"("1http://x")",
          R"("http://x/%zz")"}});
}

TEST(JsonSchemaToGbnf, Pattern) {
  check({"anchored",
         R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})",
         {R"("AB-123")"},
         {R"("AB-1234")", R"("xAB-123")", R"("ab-123")"}});
  check({"unanchored search",
         R"({"pattern": "ab"})",
         {R"("ab")", R"("xxaby")", R"("\"ab\\")"},
         {R"("a b")", R"("")"}});
  check({"alternatives anchored separately",
         R"({"pattern": "^a|b$"})",
         {R"("a")", R"("axx")", R"("xxb")", R"("b")"},
         {R"("xax")", R"("bx")"}});
  check({"json escapes of matched characters",
         R"({"pattern": "^[\"\\\\\n]+$"})",
         {R"("\"")", R"("\\")", R"("\n\"\\")"},
         {"\"\n\"", R"("a")", R"("\t")"}});
  check({"dot",
         R"({"pattern": "^.$"})",
         {R"("a")", R"("\"")", R"("\t")", "\"\xC3\xA9\""},
         {R"("\n")", R"("ab")"}});
}

TEST(JsonSchemaToGbnf, PatternWithLengthsExhaustive) {
  // pattern with minLength/maxLength: every string over a small alphabet up
  // to 6 characters is accepted exactly when std::regex_search (ECMAScript,
  // JSON Schema's semantics) finds the pattern and its length is within the
  // bounds.
  struct Bounded {
    const char* pattern;
    uint64_t min_length;
    std::optional<uint64_t> max_length;
  };
  const std::string alphabet = "ab0-_";
  for (const Bounded& b : std::vector<Bounded>{
           {"^[a-z][a-z0-9_]*$", 3, 5},
           {"^[a-z0-9]+(-[a-z0-9]+)*$", 0, 4},
           {"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", 2, 5},
           {"ab", 4, 5},
           {"^a|b$", 2, 4},
           {"(a|ab)(0|b0_)", 0, 5},
           {"^(ab)*$", 3, std::nullopt},
           {"a*", 2, 2},
           {"^[^-]{2,}-?$", 1, 4},
           {"b$", 5, std::nullopt},
       }) {
    const std::string schema = fmt::format(
        R"({{"type": "string", "pattern": "{}", "minLength": {}{}}})", b.pattern, b.min_length,
        b.max_length ? fmt::format(R"(, "maxLength": {})", *b.max_length) : "");
    SCOPED_TRACE(schema);
    auto g = compile(schema);
    ASSERT_TRUE(g);
    const std::regex re(b.pattern, std::regex::ECMAScript);
    std::vector<std::string> strings = {""};
    for (size_t len = 1; len <= 6; ++len)
      for (size_t i = strings.size(); i-- > 0;)
        if (strings[i].size() == len - 1)
          for (char c : alphabet) strings.push_back(strings[i] + c);
    for (const std::string& v : strings) {
      const bool valid = std::regex_search(v, re) && v.size() >= b.min_length &&
                         (!b.max_length || v.size() <= *b.max_length);
      ASSERT_EQ(grammar_matches(g, "\"" + v + "\""), valid) << v;
    }
  }
  // Lengths count code points; characters JSON escapes count once each.
  check({"code points and escapes",
         R"({"pattern": "x", "minLength": 2, "maxLength": 3})",
         {R"("x\"")", "\"\xC3\xA9\\tx\"", R"("\u0001x")", "\"x\xF0\x9F\x98\x80\""},
         {R"("x")", "\"\xC3\xA9\\t\\tx\"", R"("xxxx")"}});
  check({"unbounded above",
         R"({"pattern": "^[0-9]+$", "minLength": 3})",
         {R"("123")", "\"" + std::string(200, '7') + "\""},
         {R"("12")", R"("12a")"}});
}

TEST(JsonSchemaToGbnf, RealWorldFunctionParameters) {
  // OpenAI function-calling parameters, as the SDKs send them.
  check({"get_weather",
         R"({"type": "object", "properties": {
           "location": {"type": "string", "description": "City and country e.g. Bogotá, Colombia"},
           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
         "required": ["location", "unit"], "additionalProperties": false})",
         {R"({"location": "Paris, France", "unit": "celsius"})"},
         {R"({"location": "Paris"})", R"({"location": "Paris", "unit": "kelvin"})"}});
  // Pydantic v2's schema of a model with a nested model, a list of models,
  // an optional field and a literal.
  check(
      {"pydantic",
       R"({"$defs": {"Item": {"properties": {"sku": {"title": "Sku", "type": "string"},
           "qty": {"exclusiveMinimum": 0, "title": "Qty", "type": "integer"}}, "required": ["sku", "qty"],
           "title": "Item", "type": "object"}},
         "properties": {"order_id": {"format": "uuid", "title": "Order Id", "type": "string"},
           "items": {"items": {"$ref": "#/$defs/Item"}, "minItems": 1, "title": "Items", "type": "array"},
           "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Note"},
           "status": {"enum": ["new", "paid"], "title": "Status", "type": "string"},
           "placed": {"format": "date-time", "title": "Placed", "type": "string"}},
         "required": ["order_id", "items", "status", "placed"], "title": "Order", "type": "object"})",
       {R"({"order_id": "123e4567-e89b-12d3-a456-426614174000", "items": [{"sku": "A1", "qty": 2}],
             "note": null, "status": "paid", "placed": "2024-05-01T10:00:00Z"})",
        R"({"order_id": "123e4567-e89b-12d3-a456-426614174000", "items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 9}],
             "status": "new", "placed": "2024-05-01T10:00:00+02:00"})"},
       {R"({"order_id": "x", "items": [{"sku": "A1", "qty": 2}], "status": "paid", "placed": "2024-05-01T10:00:00Z"})",
        R"({"order_id": "123e4567-e89b-12d3-a456-426614174000", "items": [], "status": "paid", "placed": "2024-05-01T10:00:00Z"})",
        R"({"order_id": "123e4567-e89b-12d3-a456-426614174000", "items": [{"sku": "A1", "qty": 0}], "status": "paid", "placed": "2024-05-01T10:00:00Z"})"}});
  // Nested objects with arrays of objects (a typical extraction schema).
  check(
      {"extraction",
       R"({"type": "object", "properties": {
           "people": {"type": "array", "items": {"type": "object", "properties": {
              "name": {"type": "string"}, "age": {"type": ["integer", "null"], "minimum": 0},
              "emails": {"type": "array", "items": {"type": "string", "format": "email"}}},
              "required": ["name"]}}},
         "required": ["people"]})",
       {R"({"people": []})",
        R"({"people": [{"name": "Ann", "age": 31, "emails": ["ann@x.org"]}, {"name": "Bo", "age": null}]})"},
       {R"({"people": [{"age": 3}]})", R"({"people": [{"name": "A", "age": -1}]})",
        R"({"people": [{"name": "A", "emails": ["nope"]}]})"}});
}

TEST(JsonSchemaToGbnf, Errors) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"type": )", "json_schema at '': schema: not valid JSON ("},
      {R"(false)", "json_schema at '': false: the schema false accepts no value"},
      {R"(3)", "json_schema at '': schema: must be an object or a boolean"},
      {R"({"properties": {"a": {"type": "foo"}}})",
       "json_schema at '/properties/a': type: unknown type \"foo\""},
      {R"({"type": []})", "json_schema at '': type: must not be empty"},
      {R"({"items": {"uniqueItems": true}})",
       "json_schema at '/items': uniqueItems: not supported (the grammar cannot enforce it)"},
      {R"({"multipleOf": 2})",
       "json_schema at '': multipleOf: not supported (the grammar cannot enforce it)"},
      {R"({"properties": {"a/b": {"not": {}}}})",
       "json_schema at '/properties/a~1b': not: not supported (the grammar cannot enforce it)"},
      {R"({"if": {}, "then": {}})",
       "json_schema at '': if: not supported (the grammar cannot enforce it)"},
      {R"({"patternProperties": {"^x": {}}})",
       "json_schema at '': patternProperties: not supported (the grammar cannot enforce it)"},
      {R"({"minProperties": 1})",
       "json_schema at '': minProperties: not supported (the grammar cannot enforce it)"},
      {R"({"dependentRequired": {"a": ["b"]}})",
       "json_schema at '': dependentRequired: not supported (the grammar cannot enforce it)"},
      {R"({"$ref": "http://example.com/s.json"})",
       "json_schema at '': $ref: 'http://example.com/s.json': only references within the schema "
       "('#...') are supported"},
      {R"({"$ref": "#/$defs/missing"})",
       "json_schema at '': $ref: '#/$defs/missing' does not resolve within the schema"},
      {R"({"$ref": 1})", "json_schema at '': $ref: must be a string"},
      {R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})",
       "json_schema at '/anyOf/0': $ref: '#' refers back to itself without an enclosing object or "
       "array, so no finite value matches"},
      {R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})",
       "json_schema at '/$defs/b': $ref: '#/$defs/a' refers back to itself without an enclosing "
       "object or array, so no finite value matches"},
      {R"({"anyOf": []})", "json_schema at '': anyOf: must be a non-empty array"},
      {R"({"allOf": [{"type": "object"}], "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
          "oneOf": [{"required": ["c"]}, {"required": ["d"]}, {"required": ["e"]}, {"required": ["f"]}],
          "properties": {"x": {"anyOf": [{}, {}]}}})",
       "(no error)"},
      {R"({"format": 1})", "json_schema at '': format: must be a string"},
      {R"({"enum": [1, [2, 1e400]]})",
       "json_schema at '': schema: not valid JSON ([json.exception.out_of_range.406]"},
      {R"({"allOf": [{"type": "bool"}, {}]})",
       "json_schema at '/allOf/0': type: unknown type \"bool\""},
      {R"({"allOf": [{"type": "bool"}, {"minimum": 1}]})",
       "json_schema at '': type: unknown type \"bool\""},
      {R"({"enum": []})", "json_schema at '': enum: must be a non-empty array"},
      {R"({"type": "string", "enum": [1, 2]})",
       "json_schema at '': enum: no value has the schema's type"},
      {R"({"enum": ["a"], "minLength": 2})",
       "json_schema at '': minLength: cannot be combined with enum or const"},
      {R"({"const": "a", "enum": ["b"]})",
       "json_schema at '': const: is not one of the enum values"},
      {R"({"type": "string", "format": "hostname-idn"})",
       "json_schema at '': format: 'hostname-idn' is not supported (supported: date-time, date, "
       "time, duration, uuid, email, ipv4, ipv6, hostname, uri)"},
      {R"({"format": "date", "maxLength": 10})",
       "json_schema at '': format: cannot be combined with minLength or maxLength"},
      {R"({"pattern": "^a", "format": "date"})",
       "json_schema at '': pattern: cannot be combined with format"},
      {R"({"pattern": "^a{3}$", "minLength": 4})",
       "json_schema at '': pattern: no string of 4 or more characters matches it"},
      {R"({"pattern": "^(ab)+$", "minLength": 3, "maxLength": 3})",
       "json_schema at '': pattern: no string of 3 to 3 characters matches it"},
      {R"({"pattern": "(a|b)*a(a|b){12}", "maxLength": 20})",
       "json_schema at '': pattern: the regex needs more than 2000 automaton states"},
      {R"({"pattern": "abcdefghijklmnopqrstuvwxyz", "maxLength": 1000})",
       "json_schema at '': pattern: pattern and length bounds need more than 20000 automaton "
       "states (27 pattern states x 1001 lengths); use a smaller maxLength or a simpler "
       "pattern"},
      {R"({"pattern": "[a", "maxLength": 3})", "json_schema at '': pattern: regex at position "},
      {R"j({"pattern": "a(?=b)"})j", "json_schema at '': pattern: regex at position 1: "},
      {R"({"pattern": 5})", "json_schema at '': pattern: must be a string"},
      {R"({"minLength": -1})", "json_schema at '': minLength: must be a non-negative integer"},
      {R"({"minLength": 3, "maxLength": 2})", "json_schema at '': minLength: is above maxLength"},
      {R"({"maxLength": 1001})", "json_schema at '': maxLength: 1001 is above the supported 1000"},
      {R"({"type": "array", "minItems": 5000})",
       "json_schema at '': minItems: 5000 is above the supported 1000"},
      {R"({"minItems": 3, "maxItems": 2})", "json_schema at '': minItems: is above maxItems"},
      {R"({"prefixItems": [{}], "minItems": 2})",
       "json_schema at '': minItems: is above the 1 elements the schema allows"},
      {R"({"prefixItems": {}})", "json_schema at '': prefixItems: must be an array of schemas"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})",
       "json_schema at '': minimum: no integer lies within the bounds"},
      {R"({"type": "integer", "minimum": 1e19})",
       "json_schema at '': minimum: beyond the supported range of +-1e18"},
      {R"({"allOf": [{"minimum": 0.1}, {"minimum": 0.10000000000000000001}]})",
       "json_schema at '': minimum: 0.1 and 0.10000000000000000001 differ beyond double "
       "precision, so which of them this bound is cannot be told"},
      {R"({"type": "number", "maximum": -1e19})",
       "json_schema at '': maximum: beyond the supported range of +-1e18"},
      {R"({"type": "number", "minimum": 0.25, "exclusiveMaximum": 0.25})",
       "json_schema at '': minimum: no number lies within the bounds"},
      {R"({"type": "number", "minimum": 1e-17, "maximum": 2e-17})",
       "json_schema at '': minimum: no number lies within the bounds"},
      {R"({"type": "integer", "minimum": 0.5, "maximum": 0.75})",
       "json_schema at '': minimum: no integer lies within the bounds"},
      {R"({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1})",
       "json_schema at '': minimum: no number lies within the bounds"},
      {R"({"maximum": "3"})", "json_schema at '': maximum: must be a number"},
      {R"({"properties": []})", "json_schema at '': properties: must be an object"},
      {R"({"required": "a"})", "json_schema at '': required: must be an array"},
      {R"({"required": [1]})", "json_schema at '': required: must hold only strings"},
      {R"({"properties": {"a": false}, "required": ["a"]})",
       "json_schema at '': required: 'a' is required but its schema is false"},
      {R"({"properties": {}, "required": ["b"], "additionalProperties": false})",
       "json_schema at '': required: 'b' is required but not in properties, and "
       "additionalProperties is false"},
      {R"({"allOf": [{"type": "string"}, {"type": "integer"}]})",
       "json_schema at '': allOf: the subschemas' types do not intersect"},
      {R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})",
       "json_schema at '': allOf: cannot merge two different 'pattern' of its subschemas"},
      {R"({"allOf": [{"enum": [1]}, {"enum": [2]}]})",
       "json_schema at '': allOf: no value is in every subschema's enum/const"},
      {R"({"allOf": [true, false]})",
       "json_schema at '/allOf/1': false: the schema false accepts no value"},
      {R"({"allOf": [{"type": "string"}, false]})",
       "json_schema at '': allOf: a subschema is false, so no value matches"},
      {R"({"allOf": []})", "json_schema at '': allOf: must be a non-empty array"},
      {R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})",
       "json_schema at '/$defs/a/allOf/0': $ref: '#/$defs/a' refers back to itself without an "
       "enclosing object or array"},
      {R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}, {"minimum": 1}]}}, "$ref": "#/$defs/a"})",
       "json_schema at '/$defs/a': allOf: nested more than 64 levels deep (or a $ref loop)"},
  };
  for (const auto& [schema, message] : cases) {
    const std::string error = error_of(schema);
    EXPECT_EQ(error.substr(0, std::string_view(message).size()), message) << schema;
  }
}

TEST(JsonSchemaToGbnf, SizeGuards) {
  std::string deep = "{}";
  for (int i = 0; i < 100; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_EQ(error_of(deep).substr(0, 47), "json_schema at '/items/items/items/items/items/")
      << error_of(deep);
  EXPECT_NE(error_of(deep).find("schema: nested more than 64 levels deep"), std::string::npos);

  std::string big_enum = R"({"enum": [)";
  for (int i = 0; i <= 4096; ++i) big_enum += fmt::format("{}{}", i ? "," : "", i);
  EXPECT_EQ(error_of(big_enum + "]}"), "json_schema at '': enum: more than 4096 values");

  std::string many_alternatives = R"({"anyOf": [)";
  for (int i = 0; i <= 256; ++i)
    many_alternatives += fmt::format("{}{{\"const\": {}}}", i ? "," : "", i);
  EXPECT_EQ(error_of(many_alternatives + "]}"),
            "json_schema at '': anyOf: more than 256 alternatives");
  std::string product = R"({"allOf": [)";  // 2^9 alternatives once distributed
  for (int i = 0; i < 9; ++i)
    product += fmt::format(R"({}{{"anyOf": [{{"required": ["a{}"]}}, {{"required": ["b{}"]}}]}})",
                           i ? "," : "", i, i);
  EXPECT_EQ(error_of(product + "]}"),
            "json_schema at '': anyOf: more than 256 alternatives after distributing allOf");
  std::string many_prefix = R"({"prefixItems": [)";
  for (int i = 0; i <= 1000; ++i) many_prefix += i ? ",{}" : "{}";
  EXPECT_EQ(error_of(many_prefix + "]}"), "json_schema at '': prefixItems: more than 1000 schemas");

  std::string deep_value = "1";
  for (int i = 0; i < 100; ++i) deep_value = "[" + deep_value + "]";
  EXPECT_EQ(error_of(R"({"const": )" + deep_value + "}"),
            "json_schema at '': const: a value nested more than 64 levels deep");

  // Many long property names and enum values: the grammar stays under 4 MiB or is refused.
  std::string wide = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 6000; ++i)
    wide += fmt::format(R"({}"p{}{}": {{"enum": ["{}"]}})", i ? "," : "", i, std::string(400, 'k'),
                        std::string(400, 'v'));
  const std::string wide_error = error_of(wide + "}}");
  EXPECT_EQ(wide_error.substr(0, 29), "json_schema at '/properties/p") << wide_error;
  EXPECT_NE(wide_error.find("': schema: the grammar would be larger than 4 MiB"),
            std::string::npos);
}

TEST(JsonSchemaToGbnf, LargeButValidSchemasCompile) {
  std::string many = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 300; ++i)
    many += fmt::format(R"({}"f{}": {{"type": "integer"}})", i ? "," : "", i);
  many += R"(}, "required": ["f299"], "additionalProperties": {"type": "string"}})";
  auto g = compile(many);
  ASSERT_TRUE(g);
  EXPECT_TRUE(grammar_matches(g, R"({"f0": 1, "f7": 2, "f299": 3, "zz": "x"})"));
  EXPECT_FALSE(grammar_matches(g, R"({"f7": 2, "f0": 1, "f299": 3})"));
  EXPECT_TRUE(compile(
      R"({"type": "array", "items": {"type": "string", "maxLength": 1000}, "maxItems": 1000})"));
}

}  // namespace
}  // namespace pagoda::grammar
