// The byte-level pushdown automaton: accept/reject corpora (JSON, UTF-8,
// repetition bounds, nesting), all-or-nothing accepts, can_end / is_dead,
// forced_bytes, copies, and the bounds on ambiguous grammars.
#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"

namespace pagoda::grammar {
namespace {

std::shared_ptr<const Grammar> parse(std::string_view text) {
  auto g = parse_gbnf_shared(text);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

// llama.cpp's grammars/json.gbnf, written here from its description.
constexpr const char* kJson = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt/] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(Matcher, JsonCorpus) {
  auto g = parse(kJson);
  ASSERT_TRUE(g);
  for (const char* yes : {"{}", "{ }", R"({"a":1})", R"({"a": [1, 2.5, -3e7, true, null, "x"]})",
                          "{\"k\": {\"n\": {\"m\": []}}}\n", R"({"s":"caf\u00e9 \"q\" \\ \n"})",
                          "{\"u\":\"h\xC3\xA9llo \xF0\x9F\x98\x80\"}"}) {
    EXPECT_TRUE(grammar_matches(g, yes)) << yes;
  }
  for (const char* no :
       {"", "{", "[]", R"({"a":})", R"({"a":1,})", R"({a:1})", "{\"a\":01}", "{\"s\":\"\x01\"}",
        "{\"s\":\"\xC3\"}", "{\"s\":\"\xFF\"}", R"({"s":"\x"})", "{}  x"}) {
    EXPECT_FALSE(grammar_matches(g, no)) << no;
  }
}

TEST(Matcher, AcceptIsAllOrNothing) {
  auto g = parse(R"(root ::= "abc" | "abd")");
  Matcher m(g);
  EXPECT_TRUE(m.accept_bytes("ab"));
  const uint64_t before = m.state_hash();
  EXPECT_FALSE(m.accept_bytes("cx"));
  EXPECT_EQ(m.state_hash(), before);
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("d"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.is_dead());  // complete: may end
  EXPECT_TRUE(m.next_bytes().empty());
  EXPECT_FALSE(m.accept_bytes("x"));
  EXPECT_TRUE(m.accept_bytes(""));
}

TEST(Matcher, DeadOnlyWithoutContinuationOrEnd) {
  auto g = parse("root ::= \"a\" never\nnever ::= []");
  Matcher m(g);
  EXPECT_FALSE(m.is_dead());
  EXPECT_FALSE(m.accept_bytes("a"));  // leads nowhere: no stack survives
  EXPECT_FALSE(m.is_dead());
  EXPECT_TRUE(Matcher(parse("root ::= []")).is_dead());
  EXPECT_FALSE(Matcher(parse("root ::= [] | \"\"")).is_dead());
}

TEST(Matcher, Utf8ByteByByte) {
  auto g = parse(R"(root ::= [^a]{2})");
  Matcher m(g);
  EXPECT_TRUE(m.accept_bytes("\xE2"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("\x41"));  // not a continuation byte
  EXPECT_TRUE(m.accept_bytes("\x82\xAC"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("a"));
  EXPECT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, RepetitionBounds) {
  auto g = parse(R"(root ::= ("ab" | "c"){2,4} "!")");
  for (const char* yes : {"abc!", "cc!", "ababcab!", "cccc!"})
    EXPECT_TRUE(grammar_matches(g, yes)) << yes;
  for (const char* no : {"c!", "ccccc!", "a!", "abab"}) EXPECT_FALSE(grammar_matches(g, no)) << no;
}

TEST(Matcher, DeepNestingWithinBounds) {
  auto g = parse(R"(root ::= "[" root? "]")");
  std::string text = std::string(500, '[') + std::string(500, ']');
  EXPECT_TRUE(grammar_matches(g, text));
  EXPECT_FALSE(grammar_matches(g, text + "]"));
  EXPECT_FALSE(grammar_matches(g, std::string(500, '[') + std::string(499, ']')));
}

TEST(Matcher, NestingPastTheDepthBoundIsRefused) {
  auto g = parse(R"(root ::= "[" root "]" "x" | "")");
  Matcher m(g);
  std::string deep(kMaxStackDepth + 10, '[');
  EXPECT_FALSE(m.accept_bytes(deep));
  EXPECT_TRUE(m.accept_bytes("[[]x]x"));
}

TEST(Matcher, AmbiguityIsBoundedNotExploding) {
  // Exponentially many parses collapse into few distinct stacks.
  auto g = parse(R"(root ::= ("a" | "a" "a" | "aa")* "b")");
  Matcher m(g);
  EXPECT_TRUE(m.accept_bytes(std::string(200, 'a')));
  EXPECT_LE(m.stacks().num_stacks(), 8u);
  EXPECT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, ForcedBytes) {
  auto g = parse(R"(root ::= "{\"name\": " ("\"a\"" | "\"b\"") "}")");
  Matcher m(g);
  EXPECT_EQ(m.forced_bytes(100), "{\"name\": \"");
  EXPECT_EQ(m.forced_bytes(3), "{\"n");
  ASSERT_TRUE(m.accept_bytes("{\"name\": \"a"));
  EXPECT_EQ(m.forced_bytes(100), "\"}");
  ASSERT_TRUE(m.accept_bytes("\"}"));
  EXPECT_EQ(m.forced_bytes(100), "");  // may end
  auto opt = parse(R"(root ::= "x" "y"?)");
  Matcher o(opt);
  ASSERT_TRUE(o.accept_bytes("x"));
  EXPECT_EQ(o.forced_bytes(10), "");  // "y" or the end
}

TEST(Matcher, CopiesAreIndependent) {
  auto g = parse(R"(root ::= "a" ("b" | "c"))");
  Matcher a(g);
  ASSERT_TRUE(a.accept_bytes("a"));
  Matcher b = a;
  EXPECT_TRUE(a.accept_bytes("b"));
  EXPECT_TRUE(b.accept_bytes("c"));
  EXPECT_FALSE(b.accept_bytes("b"));
  EXPECT_TRUE(a.can_end());
  EXPECT_TRUE(b.can_end());
}

TEST(Matcher, EqualStatesHaveEqualHashes) {
  auto g = parse(R"(root ::= ("x" | "y")* "z")");
  Matcher a(g), b(g);
  ASSERT_TRUE(a.accept_bytes("xyx"));
  ASSERT_TRUE(b.accept_bytes("y"));
  EXPECT_EQ(a.state_hash(), b.state_hash());
  EXPECT_EQ(a.stacks().data(), b.stacks().data());
}

}  // namespace
}  // namespace pagoda::grammar
