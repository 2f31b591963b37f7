// gate_after_reasoning on real vocabularies: Qwen3's (single "<think>" and
// "</think>" tokens) for each way a prompt can leave the reasoning, and
// stories260K's (no such tokens: "</think>" is its encoding), with a test
// double as the request's constraint.
#include "openai/reasoning/reasoning_constraint.h"

#include <gtest/gtest.h>

#include <numeric>

#include "sequence_constraint.h"

namespace pagoda::openai {
namespace {

using pagoda::testing::allowed_ids;
using pagoda::testing::SequenceConstraint;

constexpr int64_t kQwenVocab = 151936;  // the logits of Qwen3 models: the tokenizer's, padded
constexpr int32_t kThink = 151667;
constexpr int32_t kEndThink = 151668;

const Tokenizer& qwen3() {
  static auto tok = Tokenizer::load(std::string(PAGODA_SHARED_DIR) + "/models/tokenizers/qwen3");
  return *tok.value();
}

std::vector<int32_t> prompt(const Tokenizer& tok, const std::string& generation_prompt) {
  return tok.encode_prompt("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" +
                           generation_prompt);
}

std::shared_ptr<const CompiledConstraint> answer(const Tokenizer& tok) {
  return std::make_shared<SequenceConstraint>(tok.encode("{}", false), *tok.eos_id());
}

bool allows_everything(const TokenConstraint& state, int64_t vocab) {
  std::vector<int32_t> all(static_cast<size_t>(vocab));
  std::iota(all.begin(), all.end(), 0);
  return allowed_ids(state, vocab) == all;
}

TEST(GateAfterReasoning, NoConstraintStaysNone) {
  auto parser = make_reasoning_parser("deepseek_r1").value();
  EXPECT_EQ(gate_after_reasoning(nullptr, *parser, qwen3(), prompt(qwen3(), ""), kQwenVocab),
            nullptr);
}

TEST(GateAfterReasoning, PromptThatClosedTheReasoningConstrainsFromTheFirstToken) {
  for (const char* name : {"deepseek_r1", "qwen3"}) {
    auto parser = make_reasoning_parser(name).value();
    auto inner = answer(qwen3());
    EXPECT_EQ(gate_after_reasoning(inner, *parser, qwen3(),
                                   prompt(qwen3(), "<think>\n\n</think>\n\n"), kQwenVocab),
              inner)
        << name;
  }
}

TEST(GateAfterReasoning, ReasoningFirstUntilTheEndToken) {
  // deepseek_r1 with no marker in the prompt; either parser once the prompt
  // opened <think>; a </think> earlier in the conversation does not count.
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"deepseek_r1", ""},
      {"deepseek_r1", "<think>\n"},
      {"qwen3", "<think>\n"},
  };
  const int32_t brace = qwen3().encode("{}", false).front();
  for (const auto& [name, generation_prompt] : cases) {
    SCOPED_TRACE(std::string(name) + " / " + generation_prompt);
    auto parser = make_reasoning_parser(name).value();
    auto state = gate_after_reasoning(answer(qwen3()), *parser, qwen3(),
                                      prompt(qwen3(), generation_prompt), kQwenVocab)
                     ->start();
    EXPECT_TRUE(allows_everything(*state, kQwenVocab));
    for (int32_t t : qwen3().encode("Let me think. </ think> <think>", false)) {
      ASSERT_TRUE(state->accept(t));
    }
    EXPECT_TRUE(allows_everything(*state, kQwenVocab));
    ASSERT_TRUE(state->accept(kEndThink));
    EXPECT_EQ(allowed_ids(*state, kQwenVocab), std::vector<int32_t>{brace});
  }
}

TEST(GateAfterReasoning, Qwen3WithoutMarkerLetsTheFirstTokenOpenTheReasoning) {
  auto parser = make_reasoning_parser("qwen3").value();
  const auto ids = qwen3().encode("{}", false);
  auto gated = gate_after_reasoning(
      answer(qwen3()), *parser, qwen3(),
      qwen3().encode_prompt("<|im_start|>assistant\n<think>a</think>b<|im_end|>\n"
                            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
      kQwenVocab);
  auto thinking = gated->start();
  EXPECT_EQ(allowed_ids(*thinking, kQwenVocab), (std::vector<int32_t>{ids[0], kThink}));
  ASSERT_TRUE(thinking->accept(kThink));
  EXPECT_TRUE(allows_everything(*thinking, kQwenVocab));
  ASSERT_TRUE(thinking->accept(kEndThink));
  EXPECT_EQ(allowed_ids(*thinking, kQwenVocab), std::vector<int32_t>{ids[0]});

  auto answering = gated->start();
  ASSERT_TRUE(answering->accept(ids[0]));
  EXPECT_FALSE(answering->accept(kThink));
}

TEST(GateAfterReasoning, VocabularyWithoutThinkTokensUsesTheEncoding) {
  auto tok = Tokenizer::load(std::string(PAGODA_SHARED_DIR) + "/models/stories260K").value();
  ASSERT_FALSE(tok->token_to_id("</think>"));
  const int64_t vocab = tok->vocab_size();
  const std::vector<int32_t> end = tok->encode("</think>", false);
  ASSERT_GT(end.size(), 1u);
  const auto ids = tok->encode("{}", false);

  auto deepseek = make_reasoning_parser("deepseek_r1").value();
  auto state =
      gate_after_reasoning(answer(*tok), *deepseek, *tok, tok->encode_prompt("Hi"), vocab)->start();
  for (size_t i = 0; i + 1 < end.size(); ++i) ASSERT_TRUE(state->accept(end[i]));
  EXPECT_TRUE(allows_everything(*state, vocab));
  ASSERT_TRUE(state->accept(end.back()));
  EXPECT_EQ(allowed_ids(*state, vocab), std::vector<int32_t>{ids[0]});

  // qwen3 with no "<think>" token: the output cannot open the reasoning, so
  // the constraint applies from the first token.
  auto qwen = make_reasoning_parser("qwen3").value();
  auto inner = answer(*tok);
  EXPECT_EQ(gate_after_reasoning(inner, *qwen, *tok, tok->encode_prompt("Hi"), vocab), inner);
}

}  // namespace
}  // namespace pagoda::openai
