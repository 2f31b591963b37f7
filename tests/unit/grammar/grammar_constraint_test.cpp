// Token masks against a brute-force reference (every token's bytes fed to a
// copy of the state) on random walks through several grammars with real
// tokenizers; the constraint's eos / special / finished rules, clones, the
// compiler (choices, caching, errors) and the vocabulary trie.
#include "grammar/grammar_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "grammar/compiler.h"
#include "grammar/gbnf_parser.h"
#include "grammar/gbnf_writer.h"
#include "grammar/token_masks.h"
#include "sample/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::grammar {
namespace {

namespace fs = std::filesystem;
const fs::path kTokenizers = fs::path(PAGODA_SHARED_DIR) / "models" / "tokenizers";

constexpr const char* kJson = R"gbnf(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt/] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)gbnf";

constexpr const char* kArithmetic = R"gbnf(
root ::= expr
expr ::= term (([-+*/]) term)*
term ::= [0-9]+ | "(" expr ")" | "-" term
)gbnf";

constexpr const char* kUnicode = R"gbnf(
root ::= "name: " [^a-z\n]{1,12} ("." | "。") (" " [\u4e00-\u9fff]+)?
)gbnf";

constexpr const char* kKeys = R"gbnf(
root ::= "{\"first_name\": \"" [A-Za-z]{1,10} "\", \"last_name\": \"" [A-Za-z]{1,10} "\", \"age\": " [1-9] [0-9]? "}"
)gbnf";

std::shared_ptr<const GrammarVocabulary> load_vocab(const std::string& family, int32_t extra = 0) {
  auto tok = Tokenizer::load((kTokenizers / family).string());
  if (!tok.ok()) return nullptr;
  auto v =
      GrammarVocabulary::from_tokenizer(**tok, (*tok)->eos_ids(), (*tok)->vocab_size() + extra);
  EXPECT_TRUE(v.ok());
  return v.ok() ? *v : nullptr;
}

std::vector<uint32_t> brute_force_mask(const GrammarVocabulary& vocab, const Matcher& m) {
  std::vector<uint32_t> words(static_cast<size_t>(mask_num_words(vocab.logits_vocab_size())), 0);
  for (int32_t id = 0; id < vocab.num_tokens(); ++id) {
    const std::string& b = vocab.token_bytes(id);
    if (vocab.is_special(id) || vocab.is_eos(id) || b.empty()) continue;
    Matcher copy = m;
    if (copy.accept_bytes(b)) words[id >> 5] |= 1u << (id & 31);
  }
  if (m.can_end()) {
    for (int32_t id : vocab.eos_ids()) words[id >> 5] |= 1u << (id & 31);
  }
  return words;
}

std::vector<int32_t> allowed_ids(std::span<const uint32_t> words) {
  std::vector<int32_t> ids;
  for (size_t w = 0; w < words.size(); ++w) {
    for (int b = 0; b < 32; ++b) {
      if (words[w] >> b & 1) ids.push_back(static_cast<int32_t>(w * 32 + b));
    }
  }
  return ids;
}

// Random walks: at every step the constraint's mask equals the reference,
// then a random allowed token (eos rarely) is accepted.
void check_random_walks(const std::shared_ptr<const GrammarVocabulary>& vocab, const char* gbnf,
                        int num_walks, int max_steps, uint32_t seed) {
  GrammarCompiler compiler(vocab);
  auto compiled = compiler.compile({StructuredOutputSpec::Kind::kGrammar, gbnf, {}});
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  std::mt19937 rng(seed);
  int num_steps = 0;
  for (int walk = 0; walk < num_walks; ++walk) {
    auto c = (*compiled)->start();
    auto& gc = static_cast<GrammarConstraint&>(*c);
    for (int step = 0; step < max_steps && !c->is_finished(); ++step) {
      std::vector<uint32_t> words(static_cast<size_t>(mask_num_words(vocab->logits_vocab_size())),
                                  0);
      c->fill_next_mask(words);
      const auto expected = brute_force_mask(*vocab, gc.matcher());
      ASSERT_EQ(allowed_ids(words), allowed_ids(expected)) << "walk " << walk << " step " << step;
      // The shared form (the state's cached mask + eos ids) spells the same mask.
      const TokenConstraint::SharedMask shared = c->shared_next_mask();
      ASSERT_NE(shared.base, nullptr);
      std::vector<uint32_t> from_shared(words.size(), 0);
      std::copy_n(shared.base->begin(), std::min(shared.base->size(), words.size()),
                  from_shared.begin());
      if (shared.extra != nullptr) {
        for (int32_t id : *shared.extra) from_shared[id >> 5] |= 1u << (id & 31);
      }
      ASSERT_EQ(from_shared, words) << "walk " << walk << " step " << step;
      auto ids = allowed_ids(words);
      ASSERT_FALSE(ids.empty());
      for (int32_t id : ids) ASSERT_LT(id, vocab->num_tokens());
      // Prefer text tokens so that walks go deep; end sometimes.
      std::vector<int32_t> text;
      for (int32_t id : ids) {
        if (!vocab->is_eos(id)) text.push_back(id);
      }
      const bool end = text.empty() || rng() % 16 == 0;
      int32_t pick = end ? ids.back() : text[rng() % text.size()];
      if (end && !vocab->is_eos(pick)) pick = text[rng() % text.size()];
      ASSERT_TRUE(c->accept(pick));
      ++num_steps;
    }
  }
  EXPECT_GT(num_steps, num_walks);
}

TEST(GrammarMasks, MatchBruteForceLlama2) {
  auto vocab = load_vocab("llama2");
  if (!vocab) GTEST_SKIP() << "llama2 tokenizer not present";
  for (const char* g : {kJson, kArithmetic, kUnicode, kKeys})
    check_random_walks(vocab, g, 3, 15, 1);
}

TEST(GrammarMasks, MatchBruteForceLlama3WithPaddedLogits) {
  auto vocab = load_vocab("llama3_1", /*extra=*/64);
  if (!vocab) GTEST_SKIP() << "llama3_1 tokenizer not present";
  for (const char* g : {kJson, kUnicode}) check_random_walks(vocab, g, 1, 10, 2);
}

std::shared_ptr<const GrammarVocabulary> toy_vocab() {
  // 0 "a", 1 "b", 2 "ab", 3 "" (empty), 4 "<s>" special, 5 eos, 6 "abc", 7 "ab" again
  auto v = GrammarVocabulary::create({"a", "b", "ab", "", "<s>", "</s>", "abc", "ab"},
                                     {0, 0, 0, 0, 1, 1, 0, 0}, {5}, 40);
  EXPECT_TRUE(v.ok());
  return *v;
}

std::shared_ptr<const CompiledConstraint> compile(const std::shared_ptr<const GrammarVocabulary>& v,
                                                  const std::string& gbnf) {
  GrammarCompiler compiler(v);
  auto c = compiler.compile({StructuredOutputSpec::Kind::kGrammar, gbnf, {}});
  EXPECT_TRUE(c.ok()) << c.error().message;
  return *c;
}

std::vector<int32_t> mask_ids(const TokenConstraint& c, int64_t vocab) {
  std::vector<uint32_t> words(static_cast<size_t>(mask_num_words(vocab)), 0);
  c.fill_next_mask(words);
  return allowed_ids(words);
}

TEST(GrammarConstraint, EosOnlyWhenCompleteThenFinished) {
  auto v = toy_vocab();
  auto c = compile(v, "root ::= \"a\" \"b\"*")->start();
  EXPECT_EQ(mask_ids(*c, 40), (std::vector<int32_t>{0, 2, 7}));  // "a", "ab" twice; not "abc"
  EXPECT_FALSE(c->accept(5));                                    // eos before "a"
  EXPECT_FALSE(c->accept(4));                                    // special
  EXPECT_FALSE(c->accept(3));                                    // empty bytes
  EXPECT_FALSE(c->accept(39));                                   // beyond the tokenizer
  EXPECT_TRUE(c->accept(0));
  EXPECT_EQ(mask_ids(*c, 40), (std::vector<int32_t>{1, 5}));
  EXPECT_FALSE(c->is_finished());
  EXPECT_TRUE(c->accept(5));
  EXPECT_TRUE(c->is_finished());
  EXPECT_EQ(mask_ids(*c, 40), std::vector<int32_t>{});
  EXPECT_FALSE(c->accept(1));
}

TEST(GrammarConstraint, FinishedWhenNothingCanFollow) {
  auto v = toy_vocab();
  auto c = compile(v, "root ::= \"ab\"")->start();
  EXPECT_FALSE(c->is_finished());
  EXPECT_TRUE(c->accept(7));
  EXPECT_TRUE(c->is_finished());
  EXPECT_EQ(mask_ids(*c, 40), std::vector<int32_t>{5});
}

TEST(GrammarConstraint, ClonesAreIndependent) {
  auto v = toy_vocab();
  auto a = compile(v, "root ::= \"a\" (\"b\" | \"a\" \"a\")")->start();
  ASSERT_TRUE(a->accept(0));
  auto b = a->clone();
  EXPECT_TRUE(a->accept(1));
  EXPECT_TRUE(a->is_finished());
  EXPECT_FALSE(b->is_finished());
  EXPECT_FALSE(b->accept(1) && b->accept(1));
  auto c = a->clone();
  EXPECT_TRUE(c->is_finished());
  EXPECT_EQ(mask_ids(*b, 40), std::vector<int32_t>{5});  // b took "b": only eos
}

// Jump-forward's input: the bytes the grammar forces after the tokens so
// far, bounded, none where the output may end, none once eos was accepted,
// and the clone's own.
TEST(GrammarConstraint, ForcedBytesFollowTheState) {
  auto v = toy_vocab();
  auto c = compile(v, "root ::= \"ab\" \"cab\" (\"a\" | \"b\") \"bb\"?")->start();
  EXPECT_EQ(c->forced_bytes(64), "abcab");
  EXPECT_EQ(c->forced_bytes(3), "abc");
  EXPECT_EQ(c->forced_bytes(0), "");
  ASSERT_TRUE(c->accept(2));  // "ab"
  EXPECT_EQ(c->forced_bytes(64), "cab");
  auto before = c->clone();
  EXPECT_FALSE(c->accept(6));  // "abc" does not follow "ab" here
  EXPECT_FALSE(c->accept(0));
  EXPECT_EQ(c->forced_bytes(64), "cab");  // refusals leave the state
  EXPECT_EQ(before->forced_bytes(64), "cab");
  auto d = compile(v, "root ::= \"a\" (\"b\" | \"a\")")->start();
  ASSERT_TRUE(d->accept(0));
  EXPECT_EQ(d->forced_bytes(64), "");  // "b" or "a": not forced
  ASSERT_TRUE(d->accept(1));
  EXPECT_EQ(d->forced_bytes(64), "");  // may end
  ASSERT_TRUE(d->accept(5));
  EXPECT_EQ(d->forced_bytes(64), "");
}

TEST(GrammarConstraint, MasksAreCachedByState) {
  auto v = toy_vocab();
  auto compiled = compile(v, "root ::= (\"a\" | \"b\")* \"c\"");
  auto& cg = static_cast<const CompiledGrammar&>(*compiled);
  auto c = compiled->start();
  auto first = mask_ids(*c, 40);
  ASSERT_TRUE(c->accept(2));  // "ab": the same state again
  EXPECT_EQ(mask_ids(*c, 40), first);
  EXPECT_EQ(cg.mask_cache().num_misses(), 1u);
  EXPECT_EQ(cg.mask_cache().num_hits(), 1u);
}

TEST(GrammarVocabulary, TrieHoldsEveryCandidateOnce) {
  auto v = toy_vocab();
  std::vector<int32_t> ids = v->trie_tokens();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 2, 6, 7}));
  // Each node's tokens spell the path to it.
  const auto& nodes = v->trie();
  std::vector<std::pair<uint32_t, std::string>> stack{{0, ""}};
  for (uint32_t i = 1; i < nodes.size(); ++i) {
    while (i >= nodes[stack.back().first].end) stack.pop_back();
    std::string prefix = stack.back().second + static_cast<char>(nodes[i].byte);
    for (uint32_t t = nodes[i].tokens_begin; t < nodes[i].tokens_end; ++t) {
      EXPECT_EQ(v->token_bytes(v->trie_tokens()[t]), prefix);
    }
    stack.push_back({i, prefix});
  }
  EXPECT_FALSE(GrammarVocabulary::create({"a"}, {0}, {}, 0).ok());
}

TEST(GrammarCompiler, ChoicesAreEscapedLiterals) {
  auto v = toy_vocab();
  GrammarCompiler compiler(v);
  StructuredOutputSpec spec{
      StructuredOutputSpec::Kind::kChoice, "", {"a\"b\\c", "x\ny", "caf\xC3\xA9", ""}};
  auto gbnf = GrammarCompiler::spec_to_gbnf(spec);
  ASSERT_TRUE(gbnf.ok());
  auto g = parse_gbnf_shared(*gbnf);
  ASSERT_TRUE(g.ok()) << g.error().message;
  for (const auto& c : spec.choices) EXPECT_TRUE(grammar_matches(*g, c)) << c;
  EXPECT_FALSE(grammar_matches(*g, "a"));
  EXPECT_EQ(gbnf_literal("\x01\x7F"), "\"\\x01\\x7F\"");
  auto bad = compiler.compile({StructuredOutputSpec::Kind::kChoice, "", {}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "choice: the list of choices is empty");
  auto invalid = compiler.compile({StructuredOutputSpec::Kind::kChoice, "", {"ok", "\xFF"}});
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.error().message, "choice 1 is not valid UTF-8");
}

TEST(GrammarCompiler, JsonSchemaAndJsonObject) {
  auto v = toy_vocab();
  GrammarCompiler compiler(v);
  const StructuredOutputSpec schema{StructuredOutputSpec::Kind::kJsonSchema,
                                    R"({"type": "object", "properties": {"a": {"enum": [1, 2]}},
                                        "required": ["a"]})",
                                    {}};
  auto gbnf = GrammarCompiler::spec_to_gbnf(schema);
  ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
  auto g = parse_gbnf_shared(*gbnf);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(grammar_matches(*g, R"({"a": 2})"));
  EXPECT_FALSE(grammar_matches(*g, R"({"a": 3})"));
  EXPECT_TRUE(compiler.compile(schema).ok());
  auto object = GrammarCompiler::spec_to_gbnf({StructuredOutputSpec::Kind::kJsonObject, "", {}});
  ASSERT_TRUE(object.ok());
  auto any_object = parse_gbnf_shared(*object);
  ASSERT_TRUE(any_object.ok()) << any_object.error().message;
  EXPECT_TRUE(grammar_matches(*any_object, R"({"x": [1, {"y": null}]})"));
  EXPECT_FALSE(grammar_matches(*any_object, "[1]"));
  auto bad = compiler.compile({StructuredOutputSpec::Kind::kJsonSchema, R"({"not": {}})", {}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message,
            "json_schema at '': not: not supported (the grammar cannot enforce it)");
}

TEST(GrammarCompiler, CachesBySpecAndReportsErrors) {
  auto v = toy_vocab();
  GrammarCompiler compiler(v, {.max_cached_grammars = 2, .mask_cache_bytes = 1 << 20});
  StructuredOutputSpec a{StructuredOutputSpec::Kind::kGrammar, "root ::= \"a\"", {}};
  StructuredOutputSpec b{StructuredOutputSpec::Kind::kGrammar, "root ::= \"b\"", {}};
  StructuredOutputSpec c{StructuredOutputSpec::Kind::kChoice, "", {"a"}};
  auto a1 = compiler.compile(a), a2 = compiler.compile(a), b1 = compiler.compile(b);
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  EXPECT_EQ(a1->get(), a2->get());
  EXPECT_NE(a1->get(), b1->get());
  ASSERT_TRUE(compiler.compile(c).ok());
  EXPECT_EQ(compiler.num_cached(), 2u);
  EXPECT_NE(compiler.compile(b).value().get(), nullptr);
  auto bad = compiler.compile({StructuredOutputSpec::Kind::kGrammar, "root ::= x", {}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message, "grammar: rule 'x' is referenced but not defined");
}

}  // namespace
}  // namespace pagoda::grammar
