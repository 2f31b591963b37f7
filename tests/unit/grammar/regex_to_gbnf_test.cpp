// regex_to_gbnf's contract: refused syntax names its position, limits hold on
// hostile patterns, and the rule names are the ones the header promises.
#include "grammar/regex_to_gbnf.h"

#include <gtest/gtest.h>

#include <string>

namespace pagoda::grammar {
namespace {

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
    testing::Values(Refusal{"a{1000000}", 1, "limit of 10000"},
                    Refusal{"a{10001}", 1, "limit of 10000"},
                    Refusal{"x{2,99999999999999999999}", 1, "limit of 10000"},
                    Refusal{"a{0,2501}", 1, "more than 10000 grammar elements"},
                    Refusal{"(ab){9998,}", 4, "more than 10000 grammar elements"},
                    Refusal{"\\xe9{5001}", 4, "more than 10000 grammar elements"},
                    Refusal{"((a{100}){100}){100}", 15, "unrolls to more than 100000"},
                    Refusal{"(ab{5000}){5000,}", 10, "unrolls to more than 100000"},
                    Refusal{std::string(100001, 'a'), 0, "unrolls to more than 100000"},
                    Refusal{std::string(201, '(') + std::string(201, ')'), 200,
                            "nested deeper than 200"},
                    Refusal{std::string(1000000, '('), 200, "nested deeper than 200"}));

TEST(RegexToGbnf, AcceptsTheLimits) {
  EXPECT_TRUE(regex_to_gbnf("a{10000}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("[ab]{0,2500}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("\\xe9{5000}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("(ab){9996,}", "root").ok());
  EXPECT_TRUE(regex_to_gbnf("(a{10}){10000}", "root").ok());
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
