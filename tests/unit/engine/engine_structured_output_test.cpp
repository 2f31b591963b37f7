// Structured output inside the engine, on stories260K with test-double
// constraints (constraint_doubles.h): every sample follows its constraint
// token by token, greedy and seeded, alone and batched, n > 1 forks and
// best_of, under preemption and chunking, with async scheduling on and off
// and constrained steps planned ahead (sampling deferred) or not;
// a finished constraint ends the sample with "stop"; a refused token or a
// constraint that allows none of allowed_token_ids ends it with an error
// event; beam search with a constraint is refused up front.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "constraint_doubles.h"
#include "engine_harness.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

const std::vector<int32_t> kEos = {2};
constexpr int64_t kVocab = 512;  // stories260K
constexpr int32_t kAltLen = 24;  // the alternating automaton's longest output

std::vector<int32_t> id_range(int32_t lo, int32_t hi) {
  std::vector<int32_t> ids(static_cast<size_t>(hi - lo));
  std::iota(ids.begin(), ids.end(), lo);
  return ids;
}

class EngineStructuredOutput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tok = Tokenizer::load(stories_dir());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tok_ = tok->release();
    prompt_ = new std::vector<int32_t>(tok_->encode("Once upon a time"));
  }
  static void TearDownTestSuite() {
    delete prompt_;
    delete tok_;
  }

  // Tokens 100..199 and 300..399 alternating, 2 to kAltLen of them.
  static std::shared_ptr<AutomatonConstraint> alternating(
      std::optional<int32_t> refuse_at = std::nullopt) {
    return std::make_shared<AutomatonConstraint>(
        TokenAutomaton::alternating(id_range(100, 200), id_range(300, 400), kAltLen, kEos, kVocab),
        refuse_at);
  }
  // Exactly one of a few phrases, as the tokenizer writes them.
  static std::shared_ptr<AutomatonConstraint> phrases(const std::vector<std::string>& texts) {
    std::vector<std::vector<int32_t>> seqs;
    for (const std::string& t : texts) seqs.push_back(tok_->encode(t, false));
    return std::make_shared<AutomatonConstraint>(TokenAutomaton::sequences(seqs, kEos, kVocab));
  }
  static SamplingParams greedy(int32_t max_tokens = 30) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    return p;
  }
  static SamplingParams seeded(uint64_t seed, int32_t max_tokens = 30) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = seed;
    p.max_tokens = max_tokens;
    return p;
  }
  static std::string text_of(std::span<const int32_t> tokens) {
    std::vector<int32_t> all = *prompt_;
    all.insert(all.end(), tokens.begin(), tokens.end());
    return tok_->decode(all, true).substr(tok_->decode(*prompt_, true).size());
  }
  // Every sample of `log` follows `c` and ends as its finish says.
  static void expect_follows(const RequestLog& log, const AutomatonConstraint& c,
                             int32_t max_tokens) {
    for (size_t k = 0; k < log.samples.size(); ++k) {
      const SampleLog& s = log.samples[k];
      ASSERT_TRUE(s.finish.has_value()) << log.id;
      EXPECT_EQ(s.error, "") << log.id;
      EXPECT_EQ(c.automaton().check(s.tokens, *s.finish, max_tokens), "")
          << log.id << " index " << k;
      EXPECT_TRUE(std::holds_alternative<std::monostate>(s.stop_reason)) << log.id;
    }
  }

  static inline Tokenizer* tok_ = nullptr;
  static inline std::vector<int32_t>* prompt_ = nullptr;
};

const std::vector<EngineSetup>& setups() {
  static const std::vector<EngineSetup> s = {
      {.model = stories_dir()},
      {.model = stories_dir(), .async_scheduling = false},
      // A small pool: groups are preempted and recomputed; chunks of 7.
      {.model = stories_dir(), .num_kv_blocks = 12, .max_chunk_tokens = 7},
      // Without jump-forward, constrained steps are planned ahead with their
      // sampling deferred (masks built from the tokens of the step before).
      {.model = stories_dir(), .jump_forward = false},
      {.model = stories_dir(), .num_kv_blocks = 12, .max_chunk_tokens = 7, .jump_forward = false},
  };
  return s;
}

// Whether setup `s` plans constrained steps ahead.
bool overlaps_constrained(const EngineSetup& s) {
  return s.async_scheduling && !s.jump_forward;
}

// Greedy and 24 seeded samples, batched with an unconstrained request, give
// the same outputs in every setup (async on and off, preemption), each
// following the automaton; most outputs reach its last state and end there
// ("stop" without an EOS token).
TEST_F(EngineStructuredOutput, GreedyAndSeededSamplesFollowTheConstraintInEverySetup) {
  auto c = alternating();
  std::vector<TestRequest> requests = {{"greedy", *prompt_, greedy(), 0, c},
                                       {"plain", *prompt_, greedy()}};
  for (uint64_t seed = 1; seed <= 24; ++seed)
    requests.push_back({"seed" + std::to_string(seed), *prompt_, seeded(seed), 0, c});
  std::vector<std::vector<std::vector<int32_t>>> outputs;
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs = run_all(*engine, requests);
    ASSERT_EQ(logs.size(), requests.size());
    outputs.emplace_back();
    int finished_by_constraint = 0;
    for (size_t i = 0; i < logs.size(); ++i) {
      const SampleLog& got = logs[i]->samples[0];
      outputs.back().push_back(got.tokens);
      EXPECT_EQ(got.text, text_of(got.tokens)) << logs[i]->id;
      if (requests[i].constraint == nullptr) continue;
      expect_follows(*logs[i], *c, 30);
      EXPECT_EQ(got.finish, FinishReason::kStop) << logs[i]->id;  // kAltLen < max_tokens
      if (got.tokens.size() == static_cast<size_t>(kAltLen)) ++finished_by_constraint;
    }
    EXPECT_GT(finished_by_constraint, 12);
    // The unconstrained request in the same batches is not masked.
    EXPECT_EQ(c->automaton().check(logs[1]->samples[0].tokens, FinishReason::kLength, 30).empty(),
              false);
    if (s.num_kv_blocks < 20) {
      EXPECT_GT(engine->metrics().num_preemptions, 0u) << "the small pool must preempt";
    }
    if (overlaps_constrained(s)) {
      EXPECT_GT(engine->metrics().overlapped_steps, 10u) << "constrained steps run ahead";
    }
  }
  for (size_t k = 1; k < outputs.size(); ++k) EXPECT_EQ(outputs[k], outputs[0]) << "setup " << k;
}

// n > 1: every fork starts from the start state (its first mask) and then
// follows its own state; best_of picks among constrained samples.
TEST_F(EngineStructuredOutput, ForksOfNAndBestOfEachFollowTheConstraint) {
  auto c = alternating();
  SamplingParams n4 = seeded(7);
  n4.n = 4;
  SamplingParams best = seeded(8);
  best.n = 2;
  best.best_of = 4;
  std::vector<std::vector<std::vector<int32_t>>> outputs;  // per setup, the samples' tokens
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs = run_all(*engine, {{"n4", *prompt_, n4, 0, c}, {"best", *prompt_, best, 0, c}});
    ASSERT_EQ(logs.size(), 2u);
    for (const auto& log : logs) expect_follows(*log, *c, 30);
    std::set<std::vector<int32_t>> distinct;
    outputs.emplace_back();
    for (const auto& log : logs) {
      for (const SampleLog& sample : log->samples) outputs.back().push_back(sample.tokens);
    }
    for (const SampleLog& sample : logs[0]->samples) distinct.insert(sample.tokens);
    EXPECT_GT(distinct.size(), 1u) << "the forks sample with their own seeds";
    if (overlaps_constrained(s)) EXPECT_GT(engine->metrics().overlapped_steps, 10u);
  }
  // The same samples whether the forks' steps are planned ahead or not.
  for (size_t k = 1; k < outputs.size(); ++k) EXPECT_EQ(outputs[k], outputs[0]) << "setup " << k;
}

// A choice among phrases: the output is one of them exactly, and the
// sample ends as soon as the phrase is complete (the constraint is
// finished), also when min_tokens asks for more: the constraint is the hard
// rule.
TEST_F(EngineStructuredOutput, AFinishedConstraintEndsTheSampleWithStop) {
  const std::vector<std::string> texts = {"yes", "no way", "maybe so"};
  auto c = phrases(texts);
  auto engine = start_engine({.model = stories_dir()});
  ASSERT_NE(engine, nullptr);
  std::vector<TestRequest> requests = {{"greedy", *prompt_, greedy(), 0, c}};
  for (uint64_t seed = 1; seed <= 12; ++seed)
    requests.push_back({"seed" + std::to_string(seed), *prompt_, seeded(seed), 0, c});
  SamplingParams min = greedy();
  min.min_tokens = 10;
  requests.push_back({"min_tokens", *prompt_, min, 0, c});
  auto logs = run_all(*engine, requests);
  ASSERT_EQ(logs.size(), requests.size());
  std::set<std::string> seen;
  for (const auto& log : logs) {
    const SampleLog& s = log->samples[0];
    expect_follows(*log, *c, 30);
    EXPECT_EQ(s.finish, FinishReason::kStop) << log->id;
    // A phrase's text, without the leading space of the prompt's continuation.
    std::string text = s.text;
    if (!text.empty() && text[0] == ' ') text.erase(0, 1);
    EXPECT_TRUE(std::find(texts.begin(), texts.end(), text) != texts.end())
        << log->id << ": '" << s.text << "'";
    seen.insert(text);
  }
  EXPECT_GT(seen.size(), 1u);
}

// A constraint that refuses a token its own mask allowed (a masking bug)
// ends that sample with an error event, never a crash; the others of the
// request and of the batch go on.
TEST_F(EngineStructuredOutput, ARefusedTokenEndsTheSampleWithAnError) {
  auto bad = alternating(/*refuse_at=*/3);
  auto good = alternating();
  SamplingParams n2 = seeded(3);
  n2.n = 2;
  SamplingParams best = seeded(4);
  best.best_of = 3;
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs = run_all(*engine, {{"bad", *prompt_, greedy(), 0, bad},
                                  {"bad-n2", *prompt_, n2, 0, bad},
                                  {"bad-best-of", *prompt_, best, 0, bad},
                                  {"good", *prompt_, greedy(), 0, good}});
    ASSERT_EQ(logs.size(), 4u);
    for (size_t i = 0; i < 3; ++i) {
      for (const SampleLog& sample : logs[i]->samples) {
        EXPECT_EQ(sample.finish, FinishReason::kAbort) << logs[i]->id;
        EXPECT_NE(sample.error.find("structured output"), std::string::npos) << sample.error;
        if (i < 2) {
          EXPECT_EQ(sample.tokens.size(), 3u) << "the accepted tokens were sent";
        }
      }
    }
    expect_follows(*logs[3], *good, 30);
    EXPECT_EQ(engine->metrics().finished_abort, 3u);
  }
}

// allowed_token_ids and the constraint intersect in each row's mask; when
// they share no token, the sample ends with an error naming them.
TEST_F(EngineStructuredOutput, AllowedTokenIdsIntersectTheConstraintsMask) {
  auto c = alternating();
  SamplingParams within = seeded(5);
  within.allowed_token_ids = id_range(150, 350);  // 150..199 even, 300..349 odd
  SamplingParams disjoint = greedy();
  disjoint.allowed_token_ids = id_range(200, 300);
  auto engine = start_engine({.model = stories_dir()});
  ASSERT_NE(engine, nullptr);
  auto logs = run_all(*engine,
                      {{"within", *prompt_, within, 0, c}, {"disjoint", *prompt_, disjoint, 0, c}});
  ASSERT_EQ(logs.size(), 2u);
  expect_follows(*logs[0], *c, 30);
  for (int32_t t : logs[0]->samples[0].tokens)
    EXPECT_TRUE((t >= 150 && t < 200) || (t >= 300 && t < 350)) << t;
  EXPECT_EQ(logs[1]->samples[0].finish, FinishReason::kAbort);
  EXPECT_NE(logs[1]->samples[0].error.find("allowed_token_ids"), std::string::npos)
      << logs[1]->samples[0].error;
  EXPECT_TRUE(logs[1]->samples[0].tokens.empty());
}

// Async scheduling plans a step before the previous one's tokens are known;
// a constrained sample's next mask needs its token, so such a step's
// forward runs ahead and its sampler waits for the masks. Jump-forward
// replaces a sampled token before the next step is planned: a step with a
// row of a request that jumps forward is not planned ahead.
TEST_F(EngineStructuredOutput, ConstrainedStepsArePlannedAheadUnlessTheyJumpForward) {
  for (const bool jump_forward : {false, true}) {
    auto engine = start_engine({.model = stories_dir(), .jump_forward = jump_forward});
    ASSERT_NE(engine, nullptr);
    const uint64_t before = engine->metrics().overlapped_steps;
    auto logs = run_all(*engine, {{"c", *prompt_, greedy(), 0, alternating()}});
    ASSERT_EQ(logs.size(), 1u);
    expect_follows(*logs[0], *alternating(), 30);
    const uint64_t constrained = engine->metrics().overlapped_steps - before;
    if (jump_forward) {
      EXPECT_EQ(constrained, 0u);
    } else {
      // Every decode step but the first and the last.
      EXPECT_GE(constrained, logs[0]->samples[0].tokens.size() - 2);
    }
    run_all(*engine, {{"plain", *prompt_, greedy()}});
    EXPECT_GT(engine->metrics().overlapped_steps, before + constrained);
  }
}

// One mask per constraint state and step: the n first-sample rows of a
// fork share the start state's mask (computed once), then each fork's own.
TEST_F(EngineStructuredOutput, TheForksFirstRowsComputeOneMask) {
  auto c = phrases({"yes"});
  SamplingParams p = seeded(1);
  p.n = 5;
  auto engine = start_engine({.model = stories_dir()});
  ASSERT_NE(engine, nullptr);
  auto logs = run_all(*engine, {{"n5", *prompt_, p, 0, c}});
  ASSERT_EQ(logs.size(), 1u);
  expect_follows(*logs[0], *c, 30);
  const auto yes = tok_->encode("yes", false);
  // One fill for the fork's rows, then one per fork and later token.
  EXPECT_EQ(c->counters()->fills, 1 + 5 * static_cast<int64_t>(yes.size() - 1));
}

TEST_F(EngineStructuredOutput, BeamSearchWithAConstraintIsRefused) {
  auto engine = start_engine({.model = stories_dir()});
  ASSERT_NE(engine, nullptr);
  SamplingParams p = greedy();
  p.use_beam_search = true;
  p.n = 2;
  p.beam_width = 2;
  auto log = submit(*engine, {"beam", *prompt_, p, 0, alternating()});
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(log.error().message.find("structured output"), std::string::npos)
      << log.error().message;
  EXPECT_NE(log.error().message.find("beam"), std::string::npos) << log.error().message;
}

}  // namespace
}  // namespace pagoda::test
