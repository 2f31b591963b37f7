// regex_to_gbnf end to end: its GBNF, read by parse_gbnf, matches exactly
// the strings the regex fully matches (a corpus whose verdicts Python's re
// gave, tools/make_regex_corpus.py, and the ECMAScript choices where Python
// differs); refused syntax names its position; limits hold on hostile
// patterns; the rule names are the ones the header promises.
#include "grammar/regex_to_gbnf.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"

namespace pagoda::grammar {
namespace {

// The grammar of `regex` (root rule `rule_name`), or null after a test failure.
std::shared_ptr<const Grammar> compile(std::string_view regex,
                                       std::string_view rule_name = "root") {
  Result<std::string> gbnf = regex_to_gbnf(regex, rule_name);
  EXPECT_TRUE(gbnf.ok()) << regex << ": " << gbnf.error().message;
  if (!gbnf.ok()) return nullptr;
  Result<std::shared_ptr<const Grammar>> g = parse_gbnf_shared(*gbnf, rule_name);
  EXPECT_TRUE(g.ok()) << regex << ": " << g.error().message << "\n" << *gbnf;
  return g.ok() ? *g : nullptr;
}

// Every string of `yes` matches `regex` and no string of `no` does.
void expect_language(std::string_view regex, std::initializer_list<std::string_view> yes,
                     std::initializer_list<std::string_view> no) {
  std::shared_ptr<const Grammar> g = compile(regex);
  ASSERT_TRUE(g) << regex;
  for (std::string_view s : yes) EXPECT_TRUE(grammar_matches(g, s)) << regex << " ~ " << s;
  for (std::string_view s : no) EXPECT_FALSE(grammar_matches(g, s)) << regex << " !~ " << s;
}

TEST(RegexToGbnf, CorpusAgreesWithPythonRe) {
  std::ifstream in(std::string(PAGODA_TEST_DATA) + "/grammar/regex_corpus.json");
  ASSERT_TRUE(in) << "tests/data/grammar/regex_corpus.json";
  const nlohmann::json corpus = nlohmann::json::parse(in);
  ASSERT_GE(corpus.size(), 60u);
  for (const nlohmann::json& entry : corpus) {
    const std::string regex = entry.at("regex");
    std::shared_ptr<const Grammar> g = compile(regex);
    if (!g) continue;
    for (const std::string s : entry.at("match")) {
      EXPECT_TRUE(grammar_matches(g, s)) << regex << " should match '" << s << "'";
    }
    for (const std::string s : entry.at("no_match")) {
      EXPECT_FALSE(grammar_matches(g, s)) << regex << " should not match '" << s << "'";
    }
  }
}

// Where Python's re (the corpus' reference) and ECMAScript differ, the
// documented choice: \d and \w are ASCII, \s is ECMAScript's set.
TEST(RegexToGbnf, ClassEscapesFollowEcmaScript) {
  expect_language(
      "\\s", {" ", "\t", "\n", "\v", "\f", "\r", "\u00a0", "\u2003", "\u2028", "\u3000", "\ufeff"},
      {"a", "\u200b", "\x1c", "\u0085", ""});
  expect_language("\\S", {"a", "\u200b", "\u00e9"}, {" ", "\u00a0", "\ufeff"});
  expect_language("\\d+", {"0123456789"}, {"\u0663", "\uff11", "a"});
  expect_language("\\w+", {"aZ_9"}, {"\u00e9", "-", " "});
  expect_language("[\\W\\d]+", {"9-\u00e9 "}, {"a", "_"});
}

TEST(RegexToGbnf, DotIsAnyCodePointButNewline) {
  expect_language(".", {"a", "\r", "\u2028", "\u00e9", "\U0001F600", std::string_view("\0", 1)},
                  {"\n", "", "ab", "\xff", "\xed\xa0\x80", "\xc3"});
}

TEST(RegexToGbnf, EscapesAreCodePoints) {
  expect_language("\\x41\\u0042\\U00000043\\u{44}\\u{1F600}", {"ABCD\U0001F600"}, {"ABCD"});
  expect_language("\\uD83D\\uDE00", {"\U0001F600"}, {"\xed\xa0\xbd\xed\xb8\x80"});
  expect_language("\\cJ\\ca", {"\n\x01"}, {"cJ"});
  expect_language("\\0[\\b]\\f\\v", {std::string_view("\0\b\f\v", 4)}, {"0b"});
  expect_language("\\.\\/\\-\\\"", {"./-\""}, {"a/-\""});
}

// Negated classes cover every scalar value and never a surrogate or a byte
// that is not UTF-8.
TEST(RegexToGbnf, NegatedClassesAreValidUtf8) {
  expect_language(
      "[^a]",
      {"b", "\x7f", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0010FFFF"},
      {"a", "\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\x80", "\xf4\x90\x80\x80", "\xff", "\x80"});
  expect_language("[^\\x00-\\x7F\\u00e9]+", {"\u00e8\u00ea\U0001F600"}, {"\u00e9", "a"});
  expect_language("[\\u00e0-\\u00ff\\U0001F600-\\U0001F64F]", {"\u00e0", "\u00ff", "\U0001F64F"},
                  {"\u00df", "\u0100", "\U0001F650"});
}

TEST(RegexToGbnf, AnchorsWhereTheMatchStartsOrEnds) {
  expect_language("^a|b$", {"a", "b"}, {"ab", ""});
  expect_language("(^a|^b)c$", {"ac", "bc"}, {"c", "abc"});
  expect_language("\\Aab\\Z", {"ab"}, {"a"});
  expect_language("$^", {""}, {"a"});
  expect_language("(^a)?b", {"b", "ab"}, {"a"});
  expect_language("^(?:$)", {""}, {" "});
}

TEST(RegexToGbnf, BracesThatAreNoQuantifierAreLiterals) {
  expect_language("a{", {"a{"}, {"a"});
  expect_language("x{1, 2}", {"x{1, 2}"}, {"x", "xx"});
  expect_language("a{}b}", {"a{}b}"}, {"ab"});
  expect_language("a{,}", {"", "aaaa"}, {"a{,}"});
}

TEST(RegexToGbnf, LazyQuantifiersMatchTheSameStrings) {
  expect_language("a*?b+?c??d{2,3}?", {"bdd", "aabbcddd"}, {"bd", "acdd"});
}

// Repeats of bodies that can be empty: unbounded ones must not loop, bounded
// ones must not make the grammar ambiguous about which copies are empty.
TEST(RegexToGbnf, RepeatsOfNullableBodies) {
  expect_language("(a*)*b", {"b", "aaab"}, {"", "ba"});
  expect_language("(a?b?)+", {"", "abba", "bbb"}, {"c"});
  expect_language("(|a)+b", {"b", "aab"}, {"a"});
  expect_language("((a|)*)*c", {"c", "ac"}, {"ca"});
  expect_language("(a?){3,}", {"", "aaaaaaa"}, {"b"});
  expect_language("(a?b?){2,3}", {"", "ab", "abab", "ababab", "bba"}, {"abababa", "aaaa"});
  expect_language("(a*b?){2}", {"", "aab", "aabaa", "bb", "abab"}, {"bbb", "ababa", "c"});
}

// Deep nestings of optional parts stay within parse_gbnf's ambiguity bound
// and match long inputs quickly.
TEST(RegexToGbnf, NestedOptionalRepeatsStayCheap) {
  std::string nested;
  for (int k = 0; k < 150; ++k) nested += "(b?";
  nested += "((a?){100}){100}";
  for (int k = 0; k < 150; ++k) nested += ")?";
  std::shared_ptr<const Grammar> g = compile(nested);
  ASSERT_TRUE(g);
  EXPECT_TRUE(grammar_matches(g, std::string(150, 'b') + std::string(20, 'a')));
  EXPECT_TRUE(grammar_matches(g, std::string(75, 'b')));
  EXPECT_FALSE(grammar_matches(g, std::string(151, 'b')));
  EXPECT_FALSE(grammar_matches(g, "ab"));

  std::string stars;
  for (int k = 0; k < 199; ++k) stars += "(a?";
  for (int k = 0; k < 199; ++k) stars += ")*";
  g = compile(stars);
  ASSERT_TRUE(g);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(grammar_matches(g, std::string(10000, 'a')));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// The output is rules to embed in a larger grammar under the caller's name.
TEST(RegexToGbnf, EmbedsInALargerGrammar) {
  Result<std::string> digits = regex_to_gbnf("(?:[0-9]{2}|x)+", "two-digits");
  ASSERT_TRUE(digits.ok()) << digits.error().message;
  Result<std::shared_ptr<const Grammar>> g =
      parse_gbnf_shared("root ::= \"<\" two-digits \">\"\n" + *digits);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(grammar_matches(*g, "<42x>"));
  EXPECT_FALSE(grammar_matches(*g, "<4>"));
}

TEST(RegexToGbnf, LongInputsAndAlternations) {
  std::string words;
  for (int k = 0; k < 1000; ++k) words += (k ? "|w" : "w") + std::to_string(k);
  expect_language(words, {"w0", "w999", "w42"}, {"w1000", "w", "w01"});
  std::shared_ptr<const Grammar> g = compile("[a-z]+");
  ASSERT_TRUE(g);
  EXPECT_TRUE(grammar_matches(g, std::string(100000, 'q')));
}

struct Refusal {
  std::string pattern;
  size_t position;
  std::string what;  // a part of the message after the position
};

class RegexRefusals : public testing::TestWithParam<Refusal> {};

TEST_P(RegexRefusals, NamePositionAndReason) {
  const Refusal& r = GetParam();
  Result<std::string> out = regex_to_gbnf(r.pattern, "root");
  ASSERT_FALSE(out.ok()) << r.pattern << " gave\n" << *out;
  EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument);
  const std::string prefix = "regex at position " + std::to_string(r.position) + ": ";
  EXPECT_EQ(out.error().message.rfind(prefix, 0), 0u) << out.error().message;
  EXPECT_NE(out.error().message.find(r.what), std::string::npos) << out.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Unsupported, RegexRefusals,
    testing::Values(Refusal{"foo\\b", 3, "word boundaries"}, Refusal{"\\Bx", 0, "word boundaries"},
                    Refusal{"a(?=b)", 1, "lookahead"}, Refusal{"a(?!b)", 1, "lookahead"},
                    Refusal{"(?<=a)b", 0, "lookbehind"}, Refusal{"(?<!a)b", 0, "lookbehind"},
                    Refusal{"(?i)abc", 0, "inline flags"}, Refusal{"(?i:a)", 0, "inline flags"},
                    Refusal{"(a)\\1", 3, "backreferences"},
                    Refusal{"(?P<n>a)(?P=n)", 8, "backreferences"},
                    Refusal{"(?<n>a)\\k<n>", 7, "backreferences"}, Refusal{"(?>a)", 0, "atomic"},
                    Refusal{"a*+", 2, "possessive"}, Refusal{"\\p{L}+", 0, "property"},
                    Refusal{"\\012", 0, "octal"}, Refusal{"\\q", 0, "unsupported escape \\q"}));

INSTANTIATE_TEST_SUITE_P(Anchors, RegexRefusals,
                         testing::Values(Refusal{"a^b", 1, "'^'"}, Refusal{"a$b", 1, "'$'"},
                                         Refusal{"(a$)b", 2, "'$'"}, Refusal{"a(^b)", 2, "'^'"},
                                         Refusal{"(^a)*", 1, "'^'"},
                                         Refusal{"^*a", 1, "nothing to repeat"}));

INSTANTIATE_TEST_SUITE_P(
    Malformed, RegexRefusals,
    testing::Values(Refusal{"(ab", 0, "missing ')'"}, Refusal{"ab)", 2, "unbalanced"},
                    Refusal{"[ab", 0, "unterminated character class"},
                    Refusal{"ab\\", 2, "trailing backslash"}, Refusal{"*a", 0, "nothing to repeat"},
                    Refusal{"a|+", 2, "nothing to repeat"}, Refusal{"{2}", 0, "nothing to repeat"},
                    Refusal{"a**", 2, "multiple repeat"}, Refusal{"a{2}{3}", 4, "multiple repeat"},
                    Refusal{"a{3,2}", 1, "min repeat greater than max"},
                    Refusal{"[z-a]", 1, "bad character range"},
                    Refusal{"[\\d-z]", 1, "bad character range"}, Refusal{"[]a]", 1, "ambiguous"},
                    Refusal{"[^]a]", 2, "ambiguous"}, Refusal{"\\x4", 0, "two hex digits"},
                    Refusal{"\\u12", 0, "four hex digits"}, Refusal{"\\u{110000}", 0, "U+10FFFF"},
                    Refusal{"\\U00110000", 0, "U+10FFFF"}, Refusal{"a\\uD800", 1, "surrogate"},
                    Refusal{"\\uDE00", 0, "surrogate"},
                    Refusal{"(?P<n>a)(?<n>b)", 8, "duplicate group name 'n'"},
                    Refusal{"(?P<1a>x)", 4, "group name"}, Refusal{"(?<>x)", 3, "group name"},
                    Refusal{"[^\\s\\S]", 0, "matches no string"},
                    Refusal{"a[^\\x00-\\U0010FFFF]", 0, "matches no string"},
                    // Positions count code points, not bytes.
                    Refusal{"\xc3\xa9\xe2\x82\xac\\b", 2, "word boundaries"},
                    Refusal{"ab\xff", 2, "invalid UTF-8"},
                    Refusal{"a\xed\xa0\x80", 1, "invalid UTF-8"}));

INSTANTIATE_TEST_SUITE_P(
    Limits, RegexRefusals,
    testing::Values(
        Refusal{"a{1000000}", 1, "limit of 10000"}, Refusal{"a{10001}", 1, "limit of 10000"},
        Refusal{"x{2,99999999999999999999}", 1, "limit of 10000"},
        Refusal{"a{0,2501}", 1, "more than 10000 grammar elements"},
        Refusal{"(ab){9998,}", 4, "more than 10000 grammar elements"},
        Refusal{"\\xe9{5001}", 4, "more than 10000 grammar elements"},
        // A nullable body repeated is written as its non-empty part {0,n}:
        // n optional copies, not n required ones (a fuzzer's find).
        Refusal{"^(|||||\\w{s@00000000000000){2544}$", 27, "more than 10000 grammar elements"},
        Refusal{"(\\xe9|){2001}", 7, "more than 10000 grammar elements"},
        Refusal{"((a{100}){100}){100}", 15, "unrolls to more than 100000"},
        Refusal{"(ab{5000}){5000,}", 10, "unrolls to more than 100000"},
        Refusal{std::string(100001, 'a'), 0, "unrolls to more than 100000"},
        Refusal{std::string(201, '(') + std::string(201, ')'), 200, "nested deeper than 200"},
        Refusal{std::string(1000000, '('), 200, "nested deeper than 200"}));

TEST(RegexToGbnf, AcceptsTheLimits) {
  EXPECT_TRUE(regex_to_gbnf("a{10000}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("[ab]{0,2500}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("\\xe9{5000}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("(ab){9996,}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("(a{10}){10000}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("(a|){2500}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("(\\xe9|){2000}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf(std::string(200, '(') + "a" + std::string(200, ')'), "root").ok());
  EXPECT_TRUE(regex_to_gbnf(std::string(100000, 'a'), "root").ok());
}

TEST(RegexToGbnf, RefusesARuleNameGbnfCannotSpell) {
  for (const char* name : {"", "my_rule", "a b", "x.y"}) {
    Result<std::string> out = regex_to_gbnf("a", name);
    ASSERT_FALSE(out.ok()) << name;
    EXPECT_NE(out.error().message.find("regex rule name"), std::string::npos);
  }
}

TEST(RegexToGbnf, DefinesTheRuleFirstAndPrefixesEveryHelper) {
  Result<std::string> out = regex_to_gbnf("(ab|cd)+(e|f)", "pat-1");
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->rfind("pat-1 ::= ", 0), 0u) << *out;
  ASSERT_EQ(out->back(), '\n');
  for (size_t line = out->find('\n') + 1; line < out->size(); line = out->find('\n', line) + 1) {
    EXPECT_EQ(out->compare(line, 6, "pat-1-"), 0) << *out;
  }
}

}  // namespace
}  // namespace pagoda::grammar
