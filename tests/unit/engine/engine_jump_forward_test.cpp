// Jump-forward of structured output (engine/jump_forward.h) on stories260K
// with real grammars (the grammar module over the model's SentencePiece
// vocabulary): outputs follow the grammar and carry its forced text in fewer
// engine steps than without jump-forward; usage counts every jumped token;
// max_tokens cuts a jump; a stop string inside forced text ends the output
// there; jumped tokens survive chunking and preemption; n > 1 samples jump
// independently; a grammar that forces nothing, a request with logprobs and
// a re-tokenisation the constraint refuses all decode exactly as without it;
// a batch too large for a jump's extra rows decodes as without it.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "constraint_doubles.h"
#include "engine_harness.h"
#include "grammar/compiler.h"
#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "stories_grammar_test.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

// Long fixed keys between short free values.
constexpr const char* kPerson = R"gbnf(
root ::= "{\"first_name\": \"" [a-z]{1,8} "\", \"last_name\": \"" [a-z]{1,8} "\", \"favourite_colour\": \"" ("red" | "green" | "blue") "\"}"
)gbnf";
// Nothing is ever forced: every state has several next bytes or may end.
constexpr const char* kFree = R"gbnf(
root ::= [a-z ]+ ("." | "!")
)gbnf";

class EngineJumpForward : public StoriesGrammarTest {
 protected:
  static std::shared_ptr<const CompiledConstraint> compile(const char* gbnf) {
    auto c = compiler_->compile({StructuredOutputSpec::Kind::kGrammar, gbnf, {}});
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? *c : nullptr;
  }
  // Whether `text` is a sentence of the grammar (complete) or the start of one.
  static bool matches(const char* gbnf, const std::string& text, bool complete) {
    auto g = grammar::parse_gbnf(gbnf);
    if (!g.ok()) return false;
    grammar::Matcher m(std::make_shared<const grammar::Grammar>(std::move(*g)));
    return m.accept_bytes(text) && (!complete || m.can_end());
  }
  static SamplingParams greedy(int32_t max_tokens = 120) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    return p;
  }
  static SamplingParams seeded(uint64_t seed, int32_t max_tokens = 120) {
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
  static std::vector<TestRequest> person_requests(
      const std::shared_ptr<const CompiledConstraint>& c) {
    std::vector<TestRequest> r = {{"greedy", *prompt_, greedy(), 0, c}};
    for (uint64_t seed = 1; seed <= 8; ++seed)
      r.push_back({"seed" + std::to_string(seed), *prompt_, seeded(seed), 0, c});
    return r;
  }
  struct Run {
    std::vector<std::shared_ptr<RequestLog>> logs;
    uint64_t steps = 0;
    uint64_t generation_tokens = 0;
    uint64_t preemptions = 0;
    uint64_t overlapped_steps = 0;
    uint64_t decode_only_steps = 0;
  };
  static Run run(EngineSetup setup, const std::vector<TestRequest>& requests) {
    auto engine = start_engine(setup);
    if (engine == nullptr) return {};
    Run r;
    r.logs = run_all(*engine, requests);
    const EngineMetrics m = engine->metrics();
    r.steps = m.steps.steps;
    r.generation_tokens = m.generation_tokens;
    r.preemptions = m.num_preemptions;
    r.overlapped_steps = m.overlapped_steps;
    r.decode_only_steps = m.decode_only_steps;
    return r;
  }
  static std::vector<std::vector<int32_t>> tokens_of(const Run& r) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& log : r.logs)
      for (const SampleLog& s : log->samples) out.push_back(s.tokens);
    return out;
  }
};

// With and without async scheduling: complete sentences of the grammar,
// text equal to the tokens' decoding, every token counted, and at least a
// third fewer steps than the same requests without jump-forward.
TEST_F(EngineJumpForward, OutputsFollowTheGrammarInFewerSteps) {
  auto c = compile(kPerson);
  ASSERT_NE(c, nullptr);
  const std::vector<TestRequest> requests = person_requests(c);
  for (bool async : {true, false}) {
    Run on = run({.model = stories_dir(), .async_scheduling = async}, requests);
    Run off =
        run({.model = stories_dir(), .async_scheduling = async, .jump_forward = false}, requests);
    ASSERT_EQ(on.logs.size(), requests.size());
    ASSERT_EQ(off.logs.size(), requests.size());
    uint64_t num_tokens = 1;  // run_all's gate request
    for (const Run* r : {&on, &off}) {
      for (const auto& log : r->logs) {
        const SampleLog& s = log->samples[0];
        EXPECT_EQ(s.finish, FinishReason::kStop) << log->id;
        EXPECT_EQ(s.error, "") << log->id;
        EXPECT_TRUE(matches(kPerson, s.text, /*complete=*/true)) << log->id << ": " << s.text;
        EXPECT_EQ(s.text, text_of(s.tokens)) << log->id;
        if (r == &on) num_tokens += s.tokens.size();
      }
    }
    EXPECT_EQ(on.generation_tokens, num_tokens);
    EXPECT_LT(on.steps * 3, off.steps * 2)
        << "jump-forward: " << on.steps << " steps, without: " << off.steps;
    // Async: 9 rows, so the steps are planned ahead over the jumps, which then
    // replace the token in flight (Scheduler::replace_in_flight).
    if (async) EXPECT_GT(on.overlapped_steps * 2, on.steps) << on.overlapped_steps;
  }
}

// Fewer rows than LlmEngine::kMinRowsToPipelineJumps: a step with a
// jump-forward row is not followed by one planned ahead, so every jump
// replaces its token (as without async scheduling): the same outputs.
TEST_F(EngineJumpForward, SmallBatchesJumpWithoutPlanningAhead) {
  auto c = compile(kPerson);
  ASSERT_NE(c, nullptr);
  std::vector<TestRequest> requests = person_requests(c);
  requests.resize(3);
  Run async = run({.model = stories_dir()}, requests);
  Run sync = run({.model = stories_dir(), .async_scheduling = false}, requests);
  ASSERT_EQ(async.logs.size(), requests.size());
  EXPECT_EQ(tokens_of(async), tokens_of(sync));
}

// The step shapes of a batch that jumps (what a decode graph could replay):
// without jump-forward every step after the prompts' has one new token per
// sequence; with it, a step that computes a jump's tokens has a sequence of
// several and is not decode-only. Planned ahead (32 rows, async), nearly
// every step is still overlapped. The counts are printed for the record.
TEST_F(EngineJumpForward, StepShapesOfABatchThatJumps) {
  auto c = compile(kPerson);
  ASSERT_NE(c, nullptr);
  std::vector<TestRequest> requests = {{"greedy", *prompt_, greedy(), 0, c}};
  for (uint64_t seed = 1; seed < 32; ++seed)
    requests.push_back({"seed" + std::to_string(seed), *prompt_, seeded(seed), 0, c});
  const EngineSetup on_setup{.model = stories_dir(), .max_num_seqs = 32};
  EngineSetup off_setup = on_setup;
  off_setup.jump_forward = false;
  Run on = run(on_setup, requests);
  Run off = run(off_setup, requests);
  ASSERT_EQ(on.logs.size(), requests.size());
  ASSERT_EQ(off.logs.size(), requests.size());
  for (const Run* r : {&on, &off}) {
    std::printf("jump-forward %s: %llu steps, %llu decode-only, %llu overlapped, %llu tokens\n",
                r == &on ? "on " : "off", static_cast<unsigned long long>(r->steps),
                static_cast<unsigned long long>(r->decode_only_steps),
                static_cast<unsigned long long>(r->overlapped_steps),
                static_cast<unsigned long long>(r->generation_tokens));
  }
  // Off: only the steps with a prompt (run_all's gate request, then the batch's) are not.
  EXPECT_GE(off.decode_only_steps + 3, off.steps);
  // On: jumps make steps with multi-token sequences.
  EXPECT_LT(on.decode_only_steps + 3, on.steps);
  EXPECT_GE(on.overlapped_steps + 3, on.steps);
}

// LlmEngine::kJumpForwardMaxStepRows: a step of 64 sequences leaves no rows
// for a jump's extra tokens, so 64 identical greedy requests (all running
// together to the end) decode exactly as without jump-forward, token for
// token and step for step; 8 of them still jump (fewer steps); 60 leave 4
// rows a step, so some jumps are taken or cut and the outputs stay whole
// sentences of the grammar, in fewer steps than without.
TEST_F(EngineJumpForward, LargeBatchesDecodeWithoutJumps) {
  auto c = compile(kPerson);
  ASSERT_NE(c, nullptr);
  for (size_t batch : {64, 60, 8}) {
    std::vector<TestRequest> requests;
    for (size_t i = 0; i < batch; ++i)
      requests.push_back({"greedy" + std::to_string(i), *prompt_, greedy(), 0, c});
    // One step prefills every prompt and the KV pool holds every sequence,
    // so all of them run to the end together.
    const EngineSetup on_setup{.model = stories_dir(),
                               .num_kv_blocks = 1024,
                               .max_num_seqs = 64,
                               .max_num_batched_tokens = 4096};
    EngineSetup off_setup = on_setup;
    off_setup.jump_forward = false;
    Run on = run(on_setup, requests);
    Run off = run(off_setup, requests);
    ASSERT_EQ(on.logs.size(), batch);
    ASSERT_EQ(off.logs.size(), batch);
    for (const auto& log : on.logs) {
      const SampleLog& s = log->samples[0];
      EXPECT_EQ(s.finish, FinishReason::kStop) << batch << " " << log->id;
      EXPECT_TRUE(matches(kPerson, s.text, /*complete=*/true)) << log->id << ": " << s.text;
      EXPECT_EQ(s.text, text_of(s.tokens)) << log->id;
    }
    if (batch == 64) {
      EXPECT_EQ(tokens_of(on), tokens_of(off));
      EXPECT_EQ(on.steps, off.steps);
      EXPECT_EQ(on.decode_only_steps, off.decode_only_steps);
    } else {
      EXPECT_LT(on.steps, off.steps) << batch << " sequences";
    }
  }
}

// max_tokens cuts a jump: exactly max_tokens tokens, finish length, and the
// text starts a sentence of the grammar.
TEST_F(EngineJumpForward, MaxTokensCutsAJump) {
  auto c = compile(kPerson);
  ASSERT_NE(c, nullptr);
  std::vector<TestRequest> requests;
  for (int32_t max_tokens : {1, 2, 3, 5, 8, 13})
    requests.push_back({"max" + std::to_string(max_tokens), *prompt_, greedy(max_tokens), 0, c});
  Run r = run({.model = stories_dir()}, requests);
  ASSERT_EQ(r.logs.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const SampleLog& s = r.logs[i]->samples[0];
    EXPECT_EQ(s.finish, FinishReason::kLength) << r.logs[i]->id;
    EXPECT_EQ(static_cast<int32_t>(s.tokens.size()), *requests[i].params.max_tokens)
        << r.logs[i]->id;
    EXPECT_TRUE(matches(kPerson, s.text, /*complete=*/false)) << r.logs[i]->id << ": " << s.text;
  }
  // Alone, the jump after the first sampled token reaches max_tokens 8:
  // the prompt's step is the only one.
  Run alone = run({.model = stories_dir()}, {requests[4]});
  ASSERT_EQ(alone.logs.size(), 1u);
  EXPECT_EQ(alone.logs[0]->samples[0].tokens.size(), 8u);
  EXPECT_EQ(alone.steps, 1u);
}

// A stop string inside forced text ends the output there, as it would
// token by token: the text stops before it, stop_reason names it.
TEST_F(EngineJumpForward, AStopStringInsideForcedTextEndsTheOutput) {
  auto c = compile(kPerson);
  ASSERT_NE(c, nullptr);
  std::vector<TestRequest> requests;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SamplingParams p = seeded(seed);
    p.stop = {"last_"};
    requests.push_back({"stop" + std::to_string(seed), *prompt_, p, 0, c});
  }
  SamplingParams keep = greedy();
  keep.stop = {"_colour\": \""};
  keep.include_stop_str_in_output = true;
  requests.push_back({"include", *prompt_, keep, 0, c});
  Run r = run({.model = stories_dir()}, requests);
  ASSERT_EQ(r.logs.size(), requests.size());
  for (size_t i = 0; i + 1 < requests.size(); ++i) {
    const SampleLog& s = r.logs[i]->samples[0];
    EXPECT_EQ(s.finish, FinishReason::kStop) << r.logs[i]->id;
    EXPECT_EQ(s.stop_reason,
              (std::variant<std::monostate, std::string, int32_t>{std::string("last_")}));
    EXPECT_TRUE(s.text.starts_with("{\"first_name\": \"")) << s.text;
    EXPECT_TRUE(s.text.ends_with("\", \"")) << s.text;
    EXPECT_TRUE(matches(kPerson, s.text, /*complete=*/false)) << s.text;
  }
  const SampleLog& inc = r.logs.back()->samples[0];
  EXPECT_EQ(inc.finish, FinishReason::kStop);
  EXPECT_TRUE(inc.text.ends_with("\"favourite_colour\": \"")) << inc.text;
}

// Chunks of 7 split the jumps' tokens: the outputs are those of one chunk.
// A small pool preempts and recomputes samples whose jumped tokens are not
// computed yet (and refuses jumps it lacks blocks for, so outputs may
// differ there): every output still follows the grammar. Async on and off.
TEST_F(EngineJumpForward, JumpedTokensSurviveChunkingAndPreemption) {
  auto c = compile(kPerson);
  ASSERT_NE(c, nullptr);
  const std::vector<TestRequest> requests = person_requests(c);
  Run roomy = run({.model = stories_dir()}, requests);
  ASSERT_EQ(roomy.logs.size(), requests.size());
  for (bool async : {true, false}) {
    Run chunked =
        run({.model = stories_dir(), .max_chunk_tokens = 7, .async_scheduling = async}, requests);
    EXPECT_EQ(tokens_of(chunked), tokens_of(roomy));
    Run small = run({.model = stories_dir(),
                     .num_kv_blocks = 12,
                     .max_chunk_tokens = 7,
                     .async_scheduling = async},
                    requests);
    ASSERT_EQ(small.logs.size(), requests.size());
    EXPECT_GT(small.preemptions, 0u) << "the small pool must preempt";
    for (const auto& log : small.logs) {
      const SampleLog& s = log->samples[0];
      EXPECT_EQ(s.finish, FinishReason::kStop) << log->id;
      EXPECT_TRUE(matches(kPerson, s.text, /*complete=*/true)) << log->id << ": " << s.text;
      EXPECT_EQ(s.text, text_of(s.tokens)) << log->id;
    }
  }
}

// n > 1: each sample jumps on its own state; all follow the grammar.
TEST_F(EngineJumpForward, ForksJumpIndependently) {
  auto c = compile(kPerson);
  ASSERT_NE(c, nullptr);
  SamplingParams p = seeded(11);
  p.n = 4;
  Run on = run({.model = stories_dir()}, {{"n4", *prompt_, p, 0, c}});
  Run off = run({.model = stories_dir(), .jump_forward = false}, {{"n4", *prompt_, p, 0, c}});
  ASSERT_EQ(on.logs.size(), 1u);
  ASSERT_EQ(on.logs[0]->samples.size(), 4u);
  std::set<std::string> distinct;
  for (const SampleLog& s : on.logs[0]->samples) {
    EXPECT_EQ(s.finish, FinishReason::kStop);
    EXPECT_TRUE(matches(kPerson, s.text, /*complete=*/true)) << s.text;
    EXPECT_EQ(s.text, text_of(s.tokens));
    distinct.insert(s.text);
  }
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_LT(on.steps, off.steps);
}

// Where nothing is jumped the engine decodes exactly as without
// jump-forward: a grammar that forces nothing, a request with logprobs
// (jumped tokens would have none), and a token-level constraint whose
// forced text re-tokenises into tokens it refuses.
TEST_F(EngineJumpForward, WithoutAJumpOutputsAndStepsAreUnchanged) {
  auto free = compile(kFree);
  auto person = compile(kPerson);
  ASSERT_NE(free, nullptr);
  ASSERT_NE(person, nullptr);
  // "hello world" one character per token: the continuation tokenizer
  // writes it in fewer, longer tokens, which this automaton refuses.
  const std::string phrase = "hello world";
  std::vector<int32_t> chars;
  for (char ch : phrase) {
    const std::vector<int32_t> one = tok_->encode_continuation(std::string(1, ch));
    ASSERT_EQ(one.size(), 1u) << ch;
    chars.push_back(one[0]);
  }
  ASSERT_NE(tok_->encode_continuation(phrase.substr(1)),
            std::vector<int32_t>(chars.begin() + 1, chars.end()));
  auto spelled = std::make_shared<AutomatonConstraint>(
      TokenAutomaton::sequences({chars}, tok_->eos_ids(), kVocab), std::nullopt,
      [](int32_t t) { return tok_->token_bytes(t); });
  std::vector<TestRequest> requests;
  for (uint64_t seed = 1; seed <= 4; ++seed)
    requests.push_back({"free" + std::to_string(seed), *prompt_, seeded(seed, 40), 0, free});
  SamplingParams lp = seeded(5);
  lp.logprobs = 2;
  requests.push_back({"logprobs", *prompt_, lp, 0, person});
  requests.push_back({"refused", *prompt_, greedy(), 0, spelled});
  Run on = run({.model = stories_dir()}, requests);
  Run off = run({.model = stories_dir(), .jump_forward = false}, requests);
  ASSERT_EQ(on.logs.size(), requests.size());
  EXPECT_EQ(tokens_of(on), tokens_of(off));
  // The same steps, up to the one that run_all's gate request may move (the
  // others reach the engine with it or a step later).
  EXPECT_LE(on.steps, off.steps + 1);
  EXPECT_LE(off.steps, on.steps + 1);
  EXPECT_EQ(on.logs.back()->samples[0].text, phrase);
  EXPECT_EQ(on.logs.back()->samples[0].tokens, chars);
  EXPECT_EQ(on.logs[4]->samples[0].logprobs.size(), on.logs[4]->samples[0].tokens.size());
}

// The same token-level constraint with its own tokenisation: the forced
// text re-tokenises into exactly the automaton's tokens, so it is jumped.
TEST_F(EngineJumpForward, ATokenLevelConstraintJumpsWhenTheTokensAgree) {
  const std::string phrase = "hello world";
  std::vector<int32_t> tokens = tok_->encode_continuation(phrase);
  auto c = std::make_shared<AutomatonConstraint>(
      TokenAutomaton::sequences({tokens}, tok_->eos_ids(), kVocab), std::nullopt,
      [](int32_t t) { return tok_->token_bytes(t); });
  Run on = run({.model = stories_dir()}, {{"phrase", *prompt_, greedy(), 0, c}});
  ASSERT_EQ(on.logs.size(), 1u);
  EXPECT_EQ(on.logs[0]->samples[0].tokens, tokens);
  EXPECT_EQ(on.logs[0]->samples[0].text, phrase);
  // The first token is sampled; the rest come with it: one step after the
  // prompt's (no later step samples, the constraint is finished).
  EXPECT_EQ(on.steps, 1u);
  EXPECT_EQ(on.generation_tokens, tokens.size());
}

}  // namespace
}  // namespace pagoda::test
