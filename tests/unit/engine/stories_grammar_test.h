// A test fixture for the engine tests of structured output on stories260K:
// its tokenizer, the prompt "Once upon a time" and a GrammarCompiler over its
// 512-token vocabulary, made once per test suite.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "engine_harness.h"
#include "grammar/compiler.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {

class StoriesGrammarTest : public ::testing::Test {
 protected:
  static constexpr int64_t kVocab = 512;  // stories260K

  static void SetUpTestSuite() {
    auto tok = Tokenizer::load(stories_dir());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tok_ = tok->release();
    prompt_ = new std::vector<int32_t>(tok_->encode("Once upon a time"));
    auto vocab = grammar::GrammarVocabulary::from_tokenizer(*tok_, tok_->eos_ids(), kVocab);
    ASSERT_TRUE(vocab.ok()) << vocab.error().message;
    compiler_ = new grammar::GrammarCompiler(*vocab);
  }
  static void TearDownTestSuite() {
    delete compiler_;
    delete prompt_;
    delete tok_;
    compiler_ = nullptr;
    prompt_ = nullptr;
    tok_ = nullptr;
  }

  static inline Tokenizer* tok_ = nullptr;
  static inline std::vector<int32_t>* prompt_ = nullptr;
  static inline grammar::GrammarCompiler* compiler_ = nullptr;
};

}  // namespace pagoda::test
