// Finishing rules through the engine on stories260K with its real tokenizer:
// stop strings across token boundaries (no stop text ever reaches the
// client unless asked for), stop_token_ids, EOS with ignore_eos and
// min_tokens, max_tokens; priorities; aborts in every state (waiting,
// mid-prefill, decoding, n > 1, best_of, beam search) with the KV pool empty
// afterwards; requests that can never fit. The stop rules are checked
// against the greedy text of the engine under test: the reference's on cpu;
// on cuda the engine's own (which may leave the reference's path at a bf16
// near-tie), itself checked against the reference.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "engine_harness.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

constexpr int32_t kLen = 60;

class EngineStop : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tok = Tokenizer::load(stories_dir());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tok_ = tok->release();
    ref_ = ReferenceModel::load(stories_dir()).release();
    ASSERT_NE(ref_, nullptr);
    prompt_ = new std::vector<int32_t>(tok_->encode("Once upon a time"));
    ref_greedy_ = new RefSample(ref_->sample(*prompt_, params(), std::vector<int32_t>{2}, 0, kLen));
    greedy_ = new std::vector<int32_t>(on_cuda() ? engine_greedy() : ref_greedy_->tokens);
  }
  static void TearDownTestSuite() {
    delete greedy_;
    delete ref_greedy_;
    delete prompt_;
    delete ref_;
    delete tok_;
  }
  // The engine's greedy continuation of the prompt, alone in a fresh engine
  // of SetUp()'s setup.
  static std::vector<int32_t> engine_greedy() {
    auto engine = start_engine({.model = stories_dir()});
    if (engine == nullptr) return {};
    auto logs = run_all(*engine, {{"baseline", *prompt_, params()}});
    return logs.empty() ? std::vector<int32_t>{} : logs[0]->samples[0].tokens;
  }
  void SetUp() override {
    ASSERT_NE(ref_, nullptr);
    ASSERT_EQ(greedy_->size(), static_cast<size_t>(kLen));
    engine_ = start_engine({.model = stories_dir()});
    ASSERT_NE(engine_, nullptr);
  }

  // The text of the first k greedy tokens: what decoding prompt + tokens
  // adds to the prompt's text.
  static std::string text_of(size_t k) {
    std::vector<int32_t> all = *prompt_;
    all.insert(all.end(), greedy_->begin(), greedy_->begin() + static_cast<std::ptrdiff_t>(k));
    return tok_->decode(all, true).substr(tok_->decode(*prompt_, true).size());
  }
  static SamplingParams params(int32_t max_tokens = kLen) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    return p;
  }
  std::shared_ptr<RequestLog> run_one(const SamplingParams& p, std::vector<int32_t> prompt = {}) {
    auto logs = run_all(*engine_, {{"req", prompt.empty() ? *prompt_ : prompt, p}});
    return logs.empty() ? std::make_shared<RequestLog>() : logs[0];
  }

  static inline Tokenizer* tok_ = nullptr;
  static inline ReferenceModel* ref_ = nullptr;
  static inline std::vector<int32_t>* prompt_ = nullptr;
  static inline RefSample* ref_greedy_ = nullptr;         // the reference's greedy continuation
  static inline std::vector<int32_t>* greedy_ = nullptr;  // the engine's (see the top)
  std::unique_ptr<LlmEngine> engine_;
};

TEST_F(EngineStop, PlainRunStreamsTheFullTextAndStopsAtMaxTokens) {
  auto log = run_one(params());
  const SampleLog& s = log->samples[0];
  ReferenceCheck check(ref_);
  check.expect_tokens(s.tokens, *ref_greedy_, "greedy");
  EXPECT_EQ(s.tokens, *greedy_);
  EXPECT_EQ(s.text, text_of(kLen));
  EXPECT_EQ(s.finish, FinishReason::kLength);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(s.stop_reason));
  EXPECT_EQ(log->num_prompt_tokens, static_cast<int64_t>(prompt_->size()));

  auto short_log = run_one(params(7));
  EXPECT_EQ(short_log->samples[0].tokens,
            std::vector<int32_t>(greedy_->begin(), greedy_->begin() + 7));
  EXPECT_EQ(short_log->samples[0].text, text_of(7));
  EXPECT_EQ(short_log->samples[0].finish, FinishReason::kLength);
}

// Async scheduling plans each step before the previous one's tokens are
// known; penalties need them (their counts), so such requests run step by
// step, and a plain request overlaps every decode step.
TEST_F(EngineStop, PenaltiesWaitForTheirTokensPlainRequestsOverlap) {
  const uint64_t before = engine_->metrics().overlapped_steps;
  SamplingParams p = params();
  p.presence_penalty = 0.5f;
  auto log = run_one(p);
  EXPECT_EQ(log->samples[0].tokens.size(), static_cast<size_t>(kLen));
  EXPECT_EQ(engine_->metrics().overlapped_steps, before);
  const uint64_t steps = engine_->metrics().steps.steps;
  auto plain = run_one(params());
  EXPECT_EQ(plain->samples[0].tokens, *greedy_);
  // kLen steps (one prefill, kLen - 1 decodes): all but the last plan the next.
  EXPECT_EQ(engine_->metrics().overlapped_steps - before, engine_->metrics().steps.steps - steps - 1);
}

// Reference for stop strings: the first token count k at which some stop
// string occurs in the text after the first `min_tokens - 1` tokens; the
// earliest occurrence wins, then the first string in the list.
struct StopExpect {
  size_t num_tokens = 0;
  std::string text;
  std::string matched;
};

StopExpect expect_stop(const std::vector<std::string>& stops, bool include, int32_t min_tokens,
                       const std::function<std::string(size_t)>& text_of) {
  const size_t from = min_tokens > 1 ? text_of(static_cast<size_t>(min_tokens - 1)).size() : 0;
  for (size_t k = std::max<size_t>(1, static_cast<size_t>(min_tokens)); k <= kLen; ++k) {
    const std::string t = text_of(k);
    size_t best = std::string::npos, which = 0;
    for (size_t i = 0; i < stops.size(); ++i) {
      size_t at = t.find(stops[i], from);
      if (at < best) best = at, which = i;
    }
    if (best != std::string::npos) {
      return {k, t.substr(0, best + (include ? stops[which].size() : 0)), stops[which]};
    }
  }
  return {0, "", ""};
}

TEST_F(EngineStop, StopStringsAcrossTokenBoundariesNeverLeak) {
  const std::string full = text_of(kLen);
  struct Case {
    std::vector<std::string> stop;
    bool include;
    int32_t min_tokens;
  };
  const std::vector<Case> cases = {
      {{" named Li"}, false, 0},      {{" named Li"}, true, 0}, {{"girl"}, false, 0},
      {{"park. One"}, false, 0},      {{"park. One"}, true, 0}, {{"."}, false, 0},
      {{"ball", "little"}, false, 0}, {{"e", "ere"}, true, 0},  {{"Lily"}, false, 15},
      {{"She", "park"}, true, 12},
  };
  for (const Case& c : cases) {
    SamplingParams p = params();
    p.stop = c.stop;
    p.include_stop_str_in_output = c.include;
    p.min_tokens = c.min_tokens;
    StopExpect want = expect_stop(c.stop, c.include, c.min_tokens, text_of);
    ASSERT_GT(want.num_tokens, 0u) << c.stop[0] << " must occur in: " << full;
    auto log = run_one(p);
    const SampleLog& s = log->samples[0];
    SCOPED_TRACE("stop '" + c.stop[0] + "' include " + std::to_string(c.include));
    EXPECT_EQ(s.text, want.text);
    EXPECT_EQ(s.tokens, std::vector<int32_t>(greedy_->begin(), greedy_->begin() + want.num_tokens));
    EXPECT_EQ(s.finish, FinishReason::kStop);
    ASSERT_TRUE(std::holds_alternative<std::string>(s.stop_reason));
    EXPECT_EQ(std::get<std::string>(s.stop_reason), want.matched);
    // No delta ever carried text beyond what the client may see.
    std::string seen;
    for (const std::string& d : s.deltas) {
      seen += d;
      EXPECT_EQ(want.text.substr(0, seen.size()), seen);
    }
  }
}

TEST_F(EngineStop, AStopStringThatNeverCompletesHoldsNothingBackAtTheEnd) {
  SamplingParams p = params(20);
  p.stop = {text_of(20).substr(text_of(19).size()) + "zzz"};  // starts like the last token's text
  auto log = run_one(p);
  EXPECT_EQ(log->samples[0].text, text_of(20));
  EXPECT_EQ(log->samples[0].finish, FinishReason::kLength);
}

TEST_F(EngineStop, StopTokenIds) {
  const size_t at = 5;
  const int32_t stop = (*greedy_)[at];
  const size_t first =
      static_cast<size_t>(std::find(greedy_->begin(), greedy_->end(), stop) - greedy_->begin());
  for (bool include : {false, true}) {
    SamplingParams p = params();
    p.stop_token_ids = {stop};
    p.include_stop_str_in_output = include;
    auto log = run_one(p);
    const SampleLog& s = log->samples[0];
    EXPECT_EQ(s.tokens, std::vector<int32_t>(greedy_->begin(), greedy_->begin() + first + 1));
    EXPECT_EQ(s.text, text_of(include ? first + 1 : first));
    EXPECT_EQ(s.finish, FinishReason::kStop);
    ASSERT_TRUE(std::holds_alternative<int32_t>(s.stop_reason));
    EXPECT_EQ(std::get<int32_t>(s.stop_reason), stop);
  }
  // Before min_tokens the stop token is banned: generation takes another path.
  SamplingParams p = params(30);
  p.stop_token_ids = {stop};
  p.min_tokens = static_cast<int32_t>(first) + 3;
  RefSample want = ref_->sample(*prompt_, p, std::vector<int32_t>{2}, 0, 30);
  auto log = run_one(p);
  ReferenceCheck check(ref_);
  const std::vector<int32_t>& got = log->samples[0].tokens;
  check.expect_tokens(got, want, "stop id banned before min_tokens");
  EXPECT_EQ(log->samples[0].finish, got.size() < 30 ? FinishReason::kStop : FinishReason::kLength);
}

TEST_F(EngineStop, EosIgnoreEosAndMinTokens) {
  SamplingParams p = params(6);
  p.logit_bias = {{2, 100.0f}};  // EOS (id 2) becomes the greedy choice
  auto log = run_one(p);
  EXPECT_EQ(log->samples[0].tokens, std::vector<int32_t>{2});
  EXPECT_EQ(log->samples[0].text, "");
  EXPECT_EQ(log->samples[0].finish, FinishReason::kStop);
  // An EOS stop has no stop_reason (vLLM: null); an id the request lists has.
  EXPECT_TRUE(std::holds_alternative<std::monostate>(log->samples[0].stop_reason));
  p.stop_token_ids = {2};
  log = run_one(p);
  ASSERT_TRUE(std::holds_alternative<int32_t>(log->samples[0].stop_reason));
  EXPECT_EQ(std::get<int32_t>(log->samples[0].stop_reason), 2);
  p.stop_token_ids.clear();

  p.ignore_eos = true;
  log = run_one(p);
  EXPECT_EQ(log->samples[0].tokens, std::vector<int32_t>(6, 2));
  EXPECT_EQ(log->samples[0].finish, FinishReason::kLength);

  p.ignore_eos = false;
  p.min_tokens = 4;  // EOS banned for 4 tokens: the plain greedy path, then EOS
  log = run_one(p);
  std::vector<int32_t> want(greedy_->begin(), greedy_->begin() + 4);
  want.push_back(2);
  EXPECT_EQ(log->samples[0].tokens, want);
  EXPECT_EQ(log->samples[0].text, text_of(4));
  EXPECT_EQ(log->samples[0].finish, FinishReason::kStop);
}

// An output that ends inside a byte-fallback run (stories260K spells "1" as
// the byte token <0x31>, id 52, which the detokenizer holds back until it
// knows the run is complete): the stop token closes the run, so its text is
// in the output (it was lost once).
TEST_F(EngineStop, AStopTokenReleasesTheHeldBackBytes) {
  SamplingParams p = params(6);
  p.allowed_token_ids = {2, 52};
  p.logit_bias = {{2, 100.0f}};  // EOS first whenever allowed
  p.min_tokens = 1;              // ... which it is not at step 0: <0x31>
  auto log = run_one(p);
  EXPECT_EQ(log->samples[0].tokens, (std::vector<int32_t>{52, 2}));
  EXPECT_EQ(log->samples[0].text, "1");
  EXPECT_EQ(log->samples[0].finish, FinishReason::kStop);
  p.logit_bias.clear();
  p.allowed_token_ids = {52};
  p.max_tokens = 3;  // and max_tokens ends the run too
  log = run_one(p);
  EXPECT_EQ(log->samples[0].text, "111");
  EXPECT_EQ(log->samples[0].finish, FinishReason::kLength);
}

TEST_F(EngineStop, PriorityOrdersAdmission) {
  engine_ = start_engine({.model = stories_dir(), .max_num_seqs = 1});
  ASSERT_NE(engine_, nullptr);
  std::mutex mu;
  std::vector<std::string> order;
  auto on_final = [&](const RequestOutput& ev) {
    if (ev.finish_reason) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(ev.request_id);
    }
  };
  std::vector<std::shared_ptr<RequestLog>> logs;
  std::atomic<bool> added{false};
  // While "first" runs (holding the only seat), three more arrive at once.
  auto first = submit(*engine_, {"first", *prompt_, params(8)}, [&](const RequestOutput& ev) {
    on_final(ev);
    if (added.exchange(true)) return;
    for (auto [id, prio] : {std::pair{"low", 5}, {"high", -5}, {"mid", 0}}) {
      auto l = submit(*engine_, {id, *prompt_, params(4), prio}, on_final);
      ASSERT_TRUE(l.ok());
      logs.push_back(*l);
    }
  });
  ASSERT_TRUE(first.ok());
  expect_idle_and_empty(*engine_);
  EXPECT_EQ(order, (std::vector<std::string>{"first", "high", "mid", "low"}));
  for (const auto& l : logs) expect_complete(*l);
}

TEST_F(EngineStop, AbortInEveryState) {
  // Chunks of one token: the long prompt stays mid-prefill for ~100 steps.
  engine_ = start_engine({.model = stories_dir(), .max_num_seqs = 8, .max_chunk_tokens = 1});
  ASSERT_NE(engine_, nullptr);
  std::vector<int32_t> long_prompt = *prompt_;
  for (int i = 0; i < 8; ++i)
    long_prompt.insert(long_prompt.end(), greedy_->begin(), greedy_->begin() + 12);
  SamplingParams sampled = params(40);
  sampled.temperature = 1.0f;
  sampled.seed = 3;
  SamplingParams n3 = sampled;
  n3.n = 3;
  SamplingParams beam = params(30);
  beam.use_beam_search = true;
  beam.beam_width = 3;
  beam.n = 2;
  SamplingParams best_of = sampled;
  best_of.best_of = 3;
  Engine& e = *engine_;
  // "driver" decodes one token per step and its events abort the others.
  // It comes first, and its first event waits until every request is in,
  // so that the others exist (and "prefill" is still early in its prefill)
  // when the aborts come. "waiting" comes last: with the 8 seats taken it
  // waits (admission never skips ahead).
  std::atomic<bool> submitted{false};
  auto driver =
      submit(e, {"driver", *prompt_, params(50)}, [&e, &submitted](const RequestOutput& ev) {
        while (!submitted.load()) std::this_thread::yield();
        if (ev.num_output_tokens == 3) {
          e.abort("prefill");  // mid-prefill
          e.abort("waiting");  // still waiting
        } else if (ev.num_output_tokens == 10) {
          e.abort("n3");  // decoding, after the fork into 3 samples
          e.abort("beam");
        } else if (ev.num_output_tokens == 20) {
          e.abort("driver");
          e.abort("driver");  // twice: a no-op
          e.abort("unknown");
        }
      });
  auto prefill = submit(e, {"prefill", long_prompt, params(10)});
  auto n3_log = submit(e, {"n3", *prompt_, n3});
  auto beam_log = submit(e, {"beam", *prompt_, beam});
  auto waiting = submit(e, {"waiting", *prompt_, best_of});
  submitted = true;
  ASSERT_TRUE(prefill.ok() && n3_log.ok() && beam_log.ok() && driver.ok() && waiting.ok());
  expect_idle_and_empty(*engine_);
  for (const auto* l : {&driver, &prefill, &n3_log, &beam_log, &waiting}) {
    expect_complete(***l);
    for (const SampleLog& s : (**l)->samples)
      EXPECT_EQ(s.finish, FinishReason::kAbort) << (**l)->id;
  }
  ReferenceCheck check(ref_);
  check.expect_tokens((*driver)->samples[0].tokens, ref_greedy_->prefix(20), "driver");
  EXPECT_TRUE((*prefill)->samples[0].tokens.empty());
  EXPECT_TRUE((*waiting)->samples[0].tokens.empty());
  for (const SampleLog& s : (*n3_log)->samples) EXPECT_GE(s.tokens.size(), 1u);
  for (const SampleLog& s : (*beam_log)->samples) EXPECT_TRUE(s.tokens.empty());
  EngineMetrics m = engine_->metrics();
  EXPECT_EQ(m.finished_abort, 5u);
  EXPECT_EQ(m.finished_stop + m.finished_length, 0u);
}

TEST_F(EngineStop, AbortRightAfterAddFromAnotherThread) {
  std::vector<std::shared_ptr<RequestLog>> logs;
  for (int i = 0; i < 40; ++i) {
    SamplingParams p = params(30);
    p.n = 1 + i % 3;
    p.temperature = 1.0f;
    auto l = submit(*engine_, {"r" + std::to_string(i), *prompt_, p});
    ASSERT_TRUE(l.ok());
    logs.push_back(*l);
    if (i % 2 == 0) engine_->abort("r" + std::to_string(i));
    if (i % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  expect_idle_and_empty(*engine_);
  uint64_t num_aborted = 0;
  for (size_t i = 0; i < logs.size(); ++i) {
    expect_complete(*logs[i]);
    bool any_abort = false;
    for (const SampleLog& s : logs[i]->samples) any_abort |= s.finish == FinishReason::kAbort;
    num_aborted += any_abort;
    if (i % 2 == 1) {
      EXPECT_FALSE(any_abort) << i;
    }
  }
  EngineMetrics m = engine_->metrics();
  EXPECT_EQ(m.finished_abort, num_aborted);
  EXPECT_EQ(m.finished_abort + m.finished_stop + m.finished_length, logs.size());
}

TEST_F(EngineStop, RequestsThatCanNeverFitAreRefusedUpFront) {
  engine_ = start_engine({.model = stories_dir(), .num_kv_blocks = 8});
  ASSERT_NE(engine_, nullptr);
  // The pool (8 blocks) also caps max_model_len at 128, so one sequence
  // always fits; groups may not.
  SamplingParams p = params(60);  // 2 x (5 + 60 tokens) = 2 x 5 blocks > 8
  p.n = 2;
  p.temperature = 1.0f;
  auto r = submit(*engine_, {"n2-long", *prompt_, p});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("need 10 KV blocks"), std::string::npos) << r.error().message;
  p.max_tokens = 40;  // 3 x 3 blocks > 8
  p.n = 3;
  r = submit(*engine_, {"n3", *prompt_, p});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("3 sequence(s)"), std::string::npos) << r.error().message;
  p.n = 2;
  r = submit(*engine_, {"n2", *prompt_, p});
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_idle_and_empty(*engine_);
  expect_complete(**r);
}

}  // namespace
}  // namespace pagoda::test
