// LlmEngine::compile_constraint: the engine's grammar compiler over its own
// tokenizer, eos ids and logits vocabulary (stories260K).
#include <gtest/gtest.h>

#include "engine_harness.h"
#include "sample/token_mask.h"

namespace pagoda::test {
namespace {

TEST(EngineConstraint, CompilesGrammarsOverTheModelsVocabulary) {
  EngineSetup setup;
  setup.model = stories_dir();
  std::unique_ptr<LlmEngine> engine = start_engine(setup);
  ASSERT_NE(engine, nullptr);
  const Tokenizer& tok = engine->tokenizer();
  auto compiled = engine->compile_constraint(
      {StructuredOutputSpec::Kind::kGrammar, "root ::= \" Once\" [a-z ]{0,3}", {}});
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  auto again = engine->compile_constraint(
      {StructuredOutputSpec::Kind::kGrammar, "root ::= \" Once\" [a-z ]{0,3}", {}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(compiled->get(), again->get());  // cached
  auto c = (*compiled)->start();
  const int64_t vocab = engine->info().vocab_size;
  std::vector<uint32_t> words(static_cast<size_t>(mask_num_words(vocab)), 0);
  c->fill_next_mask(words);
  ASSERT_GT(count_allowed(words), 0);
  for (int32_t id = 0; id < vocab; ++id) {
    if (!(words[id >> 5] >> (id & 31) & 1)) continue;
    const std::string bytes = tok.token_bytes(id);
    EXPECT_EQ(std::string(" Once").compare(0, bytes.size(), bytes), 0)
        << id << " '" << bytes << "'";
  }
  // Spell " Once" with the longest allowed token each time.
  for (std::string rest = " Once"; !rest.empty();) {
    int32_t best = -1;
    for (int32_t id = 0; id < vocab; ++id) {
      const std::string b = tok.token_bytes(id);
      if (!b.empty() && rest.compare(0, b.size(), b) == 0 &&
          (best < 0 || b.size() > tok.token_bytes(best).size())) {
        best = id;
      }
    }
    ASSERT_GE(best, 0) << rest;
    ASSERT_TRUE(c->accept(best)) << rest;
    rest.erase(0, tok.token_bytes(best).size());
  }
  std::fill(words.begin(), words.end(), 0u);
  c->fill_next_mask(words);
  for (int32_t eos : tok.eos_ids()) EXPECT_TRUE(words[eos >> 5] >> (eos & 31) & 1) << eos;

  auto bad = engine->compile_constraint({StructuredOutputSpec::Kind::kGrammar, "root ::= (", {}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message, "grammar line 1, column 10: expecting ')' to close this group");
  auto choice =
      engine->compile_constraint({StructuredOutputSpec::Kind::kChoice, "", {"yes", "no"}});
  EXPECT_TRUE(choice.ok());
}

}  // namespace
}  // namespace pagoda::test
