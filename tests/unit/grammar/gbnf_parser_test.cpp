// GBNF syntax (llama.cpp's grammars/README.md): every element, checked by
// what the parsed grammar accepts, and every error, checked by its message.
#include "grammar/gbnf_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "grammar/matcher.h"

namespace pagoda::grammar {
namespace {

std::shared_ptr<const Grammar> parse_ok(std::string_view text) {
  auto g = parse_gbnf_shared(text);
  EXPECT_TRUE(g.ok()) << text << "\n" << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

std::string parse_error(std::string_view text) {
  auto g = parse_gbnf(text);
  EXPECT_FALSE(g.ok()) << text;
  if (g.ok()) return "";
  EXPECT_EQ(g.error().code, ErrorCode::kInvalidArgument);
  return g.error().message;
}

void expect_language(std::string_view text, std::vector<std::string> yes,
                     std::vector<std::string> no) {
  auto g = parse_ok(text);
  if (!g) return;
  for (const auto& s : yes)
    EXPECT_TRUE(grammar_matches(g, s)) << text << " should accept '" << s << "'";
  for (const auto& s : no)
    EXPECT_FALSE(grammar_matches(g, s)) << text << " should reject '" << s << "'";
}

TEST(GbnfParser, LiteralsAndEscapes) {
  expect_language(R"(root ::= "ab" "c")", {"abc"}, {"ab", "abcd", ""});
  expect_language(R"(root ::= "\n\r\t\\\"\[\]\-")", {"\n\r\t\\\"[]-"}, {});
  expect_language(R"(root ::= "\x41\u00e9\U0001F600")", {"A\xC3\xA9\xF0\x9F\x98\x80"}, {"A"});
  expect_language("root ::= \"h\xC3\xA9\"", {"h\xC3\xA9"}, {"he"});
  expect_language(R"(root ::= "")", {""}, {"a"});
}

TEST(GbnfParser, CharacterClasses) {
  expect_language("root ::= [a-c0-9_]", {"a", "c", "5", "_"}, {"d", "", "ab", "-"});
  expect_language("root ::= [^a-z]", {"A", "\xC3\xA9", "\n", "\xF0\x9F\x98\x80"},
                  {"a", "q", "", "\xFF"});
  expect_language(R"(root ::= [\]\-\\])", {"]", "-", "\\"}, {"a"});
  expect_language("root ::= [a-]", {"a", "-"}, {"b"});
  expect_language("root ::= [\xC3\xA0-\xC3\xBF]", {"\xC3\xA0", "\xC3\xBF"}, {"\xC3\x9F", "a"});
  expect_language(R"(root ::= [\u4e00-\u9fff]+)", {"\xE4\xB8\x80\xE9\xBF\xBF"}, {"a", ""});
  expect_language("root ::= []", {}, {"", "a"});
  expect_language("root ::= [^\\x00-\\U0010FFFF] | \"x\"", {"x"}, {"a", ""});
}

TEST(GbnfParser, AnyCodePoint) {
  expect_language("root ::= .", {"a", "\n", "\xC3\xA9", "\xE2\x82\xAC", "\xF4\x8F\xBF\xBF"},
                  {"", "ab", "\xC3", "\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80"});
}

TEST(GbnfParser, AlternativesGroupsAndReferences) {
  expect_language("root ::= a | b \"!\"\na ::= \"x\"\nb ::= (\"y\" | \"z\") \"w\"",
                  {"x", "yw!", "zw!"}, {"yw", "x!", "w!"});
  expect_language("root ::= (\n  \"a\"  # first\n  | \"b\"\n)\n", {"a", "b"}, {"ab"});
  expect_language("root ::= \"a\" |\n  \"b\"", {"a", "b"}, {});
  expect_language("root ::=\n  \"a\"\n", {"a"}, {});
  expect_language("root ::= ws | \"x\"\nws ::= | \" \"", {"", " ", "x"}, {"  "});
  expect_language("root ::= rule_1 Rule-2\nrule_1 ::= \"a\"\nRule-2 ::= \"b\"", {"ab"}, {});
  expect_language("root ::= \"a\"\r\nother ::= \"b\"\r\n", {"a"}, {"b"});
}

TEST(GbnfParser, Repetitions) {
  expect_language("root ::= \"a\"*", {"", "a", "aaaa"}, {"b"});
  expect_language("root ::= \"ab\"+", {"ab", "abab"}, {"", "a", "aba"});
  expect_language("root ::= \"a\"? \"b\"", {"b", "ab"}, {"aab"});
  expect_language("root ::= [0-9]{3}", {"123"}, {"12", "1234"});
  expect_language("root ::= [0-9]{2,}", {"12", "12345"}, {"1", ""});
  expect_language("root ::= [0-9]{1,3}", {"1", "12", "123"}, {"", "1234"});
  expect_language("root ::= [0-9]{0,2}", {"", "1", "12"}, {"123"});
  expect_language("root ::= [0-9]{ 2 , 3 }", {"12", "123"}, {"1"});
  expect_language("root ::= (\"a\" | \"bc\"){2}", {"aa", "abc", "bcbc"}, {"a", "abca"});
  expect_language("root ::= \"x\"*?", {"", "xx"}, {});
}

TEST(GbnfParser, RecursionNestedBrackets) {
  expect_language("root ::= \"(\" root \")\" root | \"\"", {"", "()", "(())()", "((()))"},
                  {"(", ")(", "(()"});
}

TEST(GbnfParser, RootCanBeChosen) {
  auto g = parse_gbnf("a ::= \"x\"\nb ::= \"y\"", "b");
  ASSERT_TRUE(g.ok()) << g.error().message;
  auto shared = std::make_shared<const Grammar>(std::move(g).value());
  EXPECT_TRUE(grammar_matches(shared, "y"));
  EXPECT_FALSE(grammar_matches(shared, "x"));
}

TEST(GbnfParser, Errors) {
  EXPECT_EQ(parse_error("a ::= \"x\""), "grammar: no rule 'root'");
  EXPECT_EQ(parse_error("root ::= x"), "grammar: rule 'x' is referenced but not defined");
  EXPECT_EQ(parse_error("root ::= \"x"), "grammar line 1, column 10: unterminated literal");
  EXPECT_EQ(parse_error("root ::= [a-"), "grammar line 1, column 10: unterminated character class");
  EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\""),
            "grammar line 2, column 1: rule 'root' is defined twice");
  EXPECT_EQ(parse_error("root := \"a\""),
            "grammar line 1, column 6: expecting '::=' after the rule name");
  EXPECT_EQ(parse_error("::= \"a\""), "grammar line 1, column 1: expecting a rule name");
  EXPECT_EQ(parse_error("root ::= (\"a\""),
            "grammar line 1, column 10: expecting ')' to close this group");
  EXPECT_EQ(parse_error("root ::= \"a\" )"), "grammar line 1, column 14: unexpected ')'");
  EXPECT_EQ(parse_error("root ::= * \"a\""),
            "grammar line 1, column 10: nothing to repeat before '*'");
  EXPECT_EQ(parse_error("root ::= \"\\q\""), "grammar line 1, column 11: unknown escape '\\q'");
  EXPECT_EQ(parse_error("root ::= \"\\x4\""), "grammar line 1, column 11: \\x needs 2 hex digits");
  EXPECT_EQ(parse_error("root ::= \"\\U00110000\""),
            "grammar line 1, column 11: code point beyond U+10FFFF");
  EXPECT_EQ(parse_error("root ::= \"\\ud800\""),
            "grammar line 1, column 11: a surrogate is not a character");
  EXPECT_EQ(parse_error("root ::= [z-a]"),
            "grammar line 1, column 11: character range ends before it starts");
  EXPECT_EQ(parse_error("root ::= \"\xFF\""), "grammar line 1, column 11: invalid UTF-8");
  EXPECT_EQ(parse_error("root ::= \"a\"{"),
            "grammar line 1, column 13: expecting a number after '{'");
  EXPECT_EQ(parse_error("root ::= \"a\"{2"), "grammar line 1, column 13: expecting '}'");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,2}"),
            "grammar line 1, column 13: repetition maximum below its minimum");
  EXPECT_EQ(parse_error("root ::= \"a\"{20000}"),
            "grammar line 1, column 13: repetition expands to more than 10000 elements");
  EXPECT_EQ(parse_error("root ::= (\"abcdefghij\"{100}){100}"),
            "grammar line 1, column 29: repetition expands to more than 10000 elements");
  EXPECT_EQ(parse_error("root ::= <think>"),
            "grammar line 1, column 10: token references (<...>, !<...>) are not supported");
  EXPECT_EQ(parse_error("root ::= (\"a\"?)*"),
            "grammar line 1, column 16: the repeated item can match the empty string");
  EXPECT_EQ(parse_error("root ::= root \"a\" | \"b\""),
            "grammar: rule 'root' is left-recursive (root -> root)");
  EXPECT_EQ(parse_error("root ::= a\na ::= b \"x\" | \"y\"\nb ::= \"\" | a \"z\""),
            "grammar: rule 'a' is left-recursive (a -> b -> a)");
  EXPECT_EQ(parse_error("root ::= \"\\"),
            "grammar line 1, column 11: escape at the end of the grammar");
}

TEST(GbnfParser, DeepNestingIsAnErrorNotACrash) {
  std::string text = "root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')');
  EXPECT_EQ(parse_error(text), "grammar line 1, column 110: groups nested deeper than 100");
  std::string ok = "root ::= " + std::string(50, '(') + "\"a\"" + std::string(50, ')');
  expect_language(ok, {"a"}, {""});
}

TEST(GbnfParser, LongChainsOfRulesDoNotRecurse) {
  std::string text = "root ::= r0\n";
  for (int i = 0; i < 20000; ++i) {
    const std::string n = std::to_string(i);
    text.append("r").append(n).append(" ::= r").append(std::to_string(i + 1)).append("\n");
  }
  text += "r20000 ::= \"z\"\n";
  expect_language(text, {"z"}, {""});
}

// The fuzzer's seeds (grammar, NUL, a sentence) stay valid.
TEST(GbnfParser, FuzzSeedsParseAndMatchTheirSentences) {
  const auto dir = std::filesystem::path(PAGODA_TEST_DATA) / "grammar" / "fuzz_seeds";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string input = ss.str();
    const size_t nul = input.find('\0');
    auto g = parse_ok(input.substr(0, nul));
    if (g && nul != std::string::npos) {
      EXPECT_TRUE(grammar_matches(g, input.substr(nul + 1))) << entry.path();
    }
    ++n;
  }
  EXPECT_GE(n, 5);
}

}  // namespace
}  // namespace pagoda::grammar
