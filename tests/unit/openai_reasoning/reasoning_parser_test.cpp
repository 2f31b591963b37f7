// The reasoning parsers: where the prompt leaves the reasoning, each parser's
// split of several outputs, and the streaming property — any chunking of the
// text (every one and two cuts, fixed piece sizes, random cuts) releases
// exactly the whole parse.
#include "openai/reasoning/reasoning_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace pagoda::openai {
namespace {

struct Case {
  std::string text;
  std::optional<std::string> reasoning;
  std::string content;
};

ParsedReasoning stream_cut(const ReasoningParser& parser, PromptThinkState state,
                           std::string_view text, const std::vector<size_t>& cuts) {
  ReasoningStream stream = parser.start(state);
  std::string reasoning, content;
  auto take = [&](const ReasoningDelta& d) {
    reasoning += d.reasoning;
    content += d.content;
  };
  size_t at = 0;
  for (size_t cut : cuts) {
    take(stream.feed(text.substr(at, cut - at)));
    at = cut;
  }
  take(stream.feed(text.substr(at)));
  take(stream.finish());
  ParsedReasoning out;
  if (!reasoning.empty()) out.reasoning = reasoning;
  out.content = content;
  return out;
}

std::string fmt_cuts(size_t i, size_t j) {
  return "cuts at " + std::to_string(i) + ", " + std::to_string(j);
}

// The whole parse is `want`, and so is every chunking.
void check(const ReasoningParser& parser, PromptThinkState state, const Case& want) {
  SCOPED_TRACE(parser.name() + ": " + want.text);
  const ParsedReasoning whole = parse_reasoning(parser, state, want.text);
  EXPECT_EQ(whole.reasoning, want.reasoning);
  EXPECT_EQ(whole.content, want.content);
  auto same = [&](const std::vector<size_t>& cuts, const std::string& how) {
    const ParsedReasoning got = stream_cut(parser, state, want.text, cuts);
    EXPECT_EQ(got.reasoning, want.reasoning) << how;
    EXPECT_EQ(got.content, want.content) << how;
  };
  const size_t n = want.text.size();
  for (size_t i = 1; i < n; ++i) {
    same({i}, "cut at " + std::to_string(i));
    for (size_t j = i + 1; j < n; ++j) same({i, j}, fmt_cuts(i, j));
  }
  for (size_t piece = 1; piece <= 5; ++piece) {
    std::vector<size_t> cuts;
    for (size_t i = piece; i < n; i += piece) cuts.push_back(i);
    same(cuts, "pieces of " + std::to_string(piece));
  }
  std::mt19937 rng(static_cast<uint32_t>(n));
  for (int trial = 0; trial < 20 && n > 1; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < n; ++i) {
      if (rng() % 3 == 0) cuts.push_back(i);
    }
    same(cuts, "random cuts " + std::to_string(trial));
  }
}

std::unique_ptr<ReasoningParser> parser(const char* name) {
  return make_reasoning_parser(name).value();
}

using S = PromptThinkState;

TEST(PromptThinkState, OnlyAMarkerEndingThePromptCounts) {
  EXPECT_EQ(prompt_think_state("<|im_start|>assistant\n<think>\n"), S::kOpen);
  EXPECT_EQ(prompt_think_state("<｜Assistant｜><think>"), S::kOpen);
  EXPECT_EQ(prompt_think_state("<|im_start|>assistant\n<think>\n\n</think>\n\n"), S::kClosed);
  EXPECT_EQ(prompt_think_state("<｜Assistant｜></think>"), S::kClosed);
  EXPECT_EQ(prompt_think_state("<think>a</think>\nb<|im_end|>\n<|im_start|>assistant\n"), S::kNone);
  EXPECT_EQ(prompt_think_state("user: SAY:<think>x</think>y\nassistant:"), S::kNone);
  EXPECT_EQ(prompt_think_state(""), S::kNone);
  EXPECT_EQ(prompt_think_state(" \n"), S::kNone);
}

TEST(ReasoningParser, NamesAndUnknownName) {
  EXPECT_EQ(reasoning_parser_names(), (std::vector<std::string>{"deepseek_r1", "qwen3"}));
  for (const auto& name : reasoning_parser_names()) {
    EXPECT_EQ(make_reasoning_parser(name).value()->name(), name);
  }
  auto bad = make_reasoning_parser("granite");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'granite'"), std::string::npos);
  EXPECT_NE(bad.error().message.find("deepseek_r1, qwen3"), std::string::npos);
}

TEST(ReasoningParser, DeepSeekR1ReasonsUpToTheEndMarkerWithOrWithoutTheOpeningOne) {
  auto p = parser("deepseek_r1");
  const std::vector<Case> cases = {
      {"<think>Let me see.</think>\n\nThe answer.", "Let me see.", "The answer."},
      {"Let me see.</think>The answer.", "Let me see.", "The answer."},
      {"Still thinking...", "Still thinking...", ""},
      {"", std::nullopt, ""},
      {"</think>", std::nullopt, ""},
      {"</think>\n\n", std::nullopt, ""},
      {"<thin", "<thin", ""},
      {"a</thin", "a</thin", ""},
      {" \n<think>\nx\n</think>\n\r\n\nA\n\nB</think>C", "\nx\n", "A\n\nB</think>C"},
      {"<think>a<think>b</think> c", "a<think>b", " c"},
      {"\n\nplain\n</think>", "\n\nplain\n", ""},
  };
  for (const auto& c : cases) {
    check(*p, S::kNone, c);
    check(*p, S::kOpen, c);
  }
}

TEST(ReasoningParser, DeepSeekR1AfterAPromptThatClosedTheReasoningIsContent) {
  auto p = parser("deepseek_r1");
  check(*p, S::kClosed, {"The answer.</think>x", std::nullopt, "The answer.</think>x"});
  check(*p, S::kClosed, {"{\"a\": 1}", std::nullopt, "{\"a\": 1}"});
  check(*p, S::kClosed, {"<think>r</think>\nc", "r", "c"});
}

TEST(ReasoningParser, Qwen3ReasonsOnlyWhenThinkOpensTheOutput) {
  auto p = parser("qwen3");
  const std::vector<Case> cases = {
      {"<think>\nreason\n</think>\n\nAnswer", "\nreason\n", "Answer"},
      {"\n<think>r", "r", ""},
      {"<think></think>\n\nAnswer", std::nullopt, "Answer"},
      {"Answer without thinking</think>x", std::nullopt, "Answer without thinking</think>x"},
      {"Hello <think>x</think>y", std::nullopt, "Hello <think>x</think>y"},
      {"  ", std::nullopt, "  "},
      {"<thi", std::nullopt, "<thi"},
      {"\n\n{\"a\": [1]}", std::nullopt, "\n\n{\"a\": [1]}"},
  };
  for (const auto& c : cases) {
    check(*p, S::kNone, c);
    check(*p, S::kClosed, c);
  }
}

TEST(ReasoningParser, Qwen3AfterAPromptThatOpenedTheReasoning) {
  auto p = parser("qwen3");
  check(*p, S::kOpen, {"r</think>\n\nc", "r", "c"});
  check(*p, S::kOpen, {"\nstill thinking", "\nstill thinking", ""});
  check(*p, S::kOpen, {"<think>r</think>c", "r", "c"});
}

}  // namespace
}  // namespace pagoda::openai
