// Randomized engine stress on stories260K over a tiny KV pool: thousands of
// random adds (random n, best_of, beam search, stops, logprobs, priorities,
// prompts sharing prefixes) and aborts, from the test thread and from inside
// output sinks. Checks the output contract of every request (exactly one
// final event per index, nothing after it, sizes within max_tokens), the
// scheduler invariants after every step, consistent metrics and an empty
// pool at the end; once with suffix-decoding speculation. Also built with
// ASan + UBSan (pagoda_add_sanitize_test).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "engine_harness.h"

namespace pagoda::test {
namespace {

// The sanitizer build runs about ten times slower: fewer operations there.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PAGODA_STRESS_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(PAGODA_STRESS_SANITIZED)
constexpr int kOpsScale = 2;  // divisor
#else
constexpr int kOpsScale = 1;
#endif

struct StressConfig {
  int num_ops = 2500;
  int32_t max_chunk_tokens = 0;
  std::string speculative = {};  // --speculative-config; "" off
};

class Stress {
 public:
  Stress(LlmEngine& engine, uint64_t seed) : engine_(engine), rng_(seed), hook_rng_(seed + 1) {
    std::uniform_int_distribution<int32_t> tok(3, 511);
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> p = {1};
      const int len = 8 + 9 * i;
      while (static_cast<int>(p.size()) < len) p.push_back(tok(rng_));
      prefixes_.push_back(p);
    }
  }

  void run(int num_ops) {
    for (int op = 0; op < num_ops; ++op) {
      if (op % 250 == 0) burst();
      const int r = pick(0, 99);
      if (r < 60) {
        add();
      } else if (r < 90) {
        if (!added_.empty())
          engine_.abort(
              added_[static_cast<size_t>(pick(0, static_cast<int>(added_.size()) - 1))].id);
      } else if (r < 99) {
        std::this_thread::yield();
      } else {
        ASSERT_TRUE(engine_.wait_idle_for(std::chrono::seconds(120))) << "stuck requests";
      }
    }
    expect_idle_and_empty(engine_);
    check_results();
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::vector<int32_t> prompt() {
    std::vector<int32_t> p;
    if (pick(0, 2) > 0)
      p = prefixes_[static_cast<size_t>(pick(0, static_cast<int>(prefixes_.size()) - 1))];
    const int extra = pick(p.empty() ? 1 : 0, 30);
    for (int i = 0; i < extra; ++i) p.push_back(pick(3, 511));
    return p;
  }

  SamplingParams params() {
    SamplingParams p;
    p.max_tokens = pick(1, 20);
    p.temperature = pick(0, 1) ? 0.0f : 0.8f;
    if (pick(0, 1)) p.top_k = pick(1, 40);
    if (pick(0, 1)) p.seed = static_cast<uint64_t>(pick(0, 1000));
    const int kind = pick(0, 9);
    if (kind < 2) {
      p.use_beam_search = true;
      p.temperature = 0.0f;
      p.beam_width = pick(2, 3);
      p.n = pick(1, p.beam_width);
      p.early_stopping = static_cast<EarlyStopping>(pick(0, 2));
    } else if (kind < 5) {
      p.temperature = 0.8f;  // several samples need sampling
      p.n = pick(1, 3);
      if (pick(0, 1)) p.best_of = pick(p.n, 3);
    }
    if (!p.use_beam_search) {
      static const std::vector<std::string> kStops = {"e", "the", "\n", "ing", ". ", "a"};
      if (pick(0, 2) == 0) p.stop = {kStops[static_cast<size_t>(pick(0, 5))]};
      if (pick(0, 3) == 0) p.stop_token_ids = {pick(3, 511)};
      if (pick(0, 3) == 0) p.min_tokens = pick(0, *p.max_tokens);
      p.ignore_eos = pick(0, 1);
      p.include_stop_str_in_output = pick(0, 1);
      if (pick(0, 2) == 0) p.logprobs = pick(0, 5);
    }
    if (pick(0, 4) == 0) p.prompt_logprobs = pick(0, 3);
    return p;
  }

  // Ten long requests that reach the engine together, whatever the relative
  // speed of this thread and the engine thread (a loaded CI machine): a
  // one-token gate request holds the engine thread in its event until they
  // are queued. They overfill the 24-block pool (preemption) and share
  // prompt prefixes (cache hits), so every run covers both.
  void burst() {
    auto queued = std::make_shared<std::atomic<bool>>(false);
    SamplingParams one;
    one.temperature = 0.0f;
    one.max_tokens = 1;
    EventHook hold = [queued](const RequestOutput&) {
      for (int i = 0; i < 5000 && !queued->load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    TestRequest gate{"s" + std::to_string(next_id_++), {1}, one, 0};
    Result<std::shared_ptr<RequestLog>> g = submit(engine_, gate, hold);
    ASSERT_TRUE(g.ok()) << g.error().message;
    added_.push_back(gate);
    logs_.push_back(*g);
    for (int k = 0; k < 10; ++k) {
      std::vector<int32_t> p = prefixes_.back();
      for (int i = 0; i < 20; ++i) p.push_back(pick(3, 511));
      SamplingParams long_run;
      long_run.temperature = 0.0f;
      long_run.max_tokens = 20;
      long_run.ignore_eos = true;
      TestRequest r{"s" + std::to_string(next_id_++), p, long_run, 0};
      Result<std::shared_ptr<RequestLog>> log = submit(engine_, r);
      ASSERT_TRUE(log.ok()) << log.error().message;
      added_.push_back(r);
      logs_.push_back(*log);
    }
    queued->store(true);
  }

  void add() {
    TestRequest r{"s" + std::to_string(next_id_++), prompt(), params(), pick(-2, 2)};
    // Now and then an event aborts its own request or another one.
    EventHook hook = [this](const RequestOutput& ev) {
      std::uniform_int_distribution<int> d(0, 199);
      const int x = d(hook_rng_);
      if (x == 0) engine_.abort(ev.request_id);
      if (x == 1) engine_.abort("s" + std::to_string(d(hook_rng_) * 10));
    };
    Result<std::shared_ptr<RequestLog>> log = submit(engine_, r, hook);
    ASSERT_TRUE(log.ok()) << log.error().message;
    added_.push_back(r);
    logs_.push_back(*log);
  }

  void check_results() {
    EngineMetrics m = engine_.metrics();
    EXPECT_EQ(m.finished_stop + m.finished_length + m.finished_abort, added_.size());
    EXPECT_GT(m.finished_abort, 0u);
    EXPECT_GT(m.finished_stop + m.finished_length, 0u);
    EXPECT_GT(m.num_preemptions, 0u);
    EXPECT_GT(m.prefix_cache_hits, 0u);
    for (size_t i = 0; i < added_.size(); ++i) {
      const RequestLog& log = *logs_[i];
      const SamplingParams& p = added_[i].params;
      expect_complete(log);
      bool aborted = false;
      for (const SampleLog& s : log.samples) {
        aborted |= s.finish == FinishReason::kAbort;
        EXPECT_LE(static_cast<int32_t>(s.tokens.size()), *p.max_tokens) << log.id;
        EXPECT_TRUE(s.error.empty()) << log.id << ": " << s.error;
        if (s.finish == FinishReason::kLength && !p.use_beam_search) {
          EXPECT_EQ(static_cast<int32_t>(s.tokens.size()), *p.max_tokens) << log.id;
        }
        if (s.finish == FinishReason::kStop && !p.use_beam_search) {
          EXPECT_GE(static_cast<int32_t>(s.tokens.size()), std::max(1, p.min_tokens)) << log.id;
        }
        if (p.logprobs && s.finish != FinishReason::kAbort) {
          EXPECT_EQ(s.logprobs.size(), s.tokens.size()) << log.id;
        }
      }
      if (p.prompt_logprobs && !aborted) {
        EXPECT_EQ(log.num_prompt_logprob_events, 1) << log.id;
        EXPECT_EQ(log.prompt_logprobs.size(), added_[i].prompt.size()) << log.id;
      }
      EXPECT_LE(log.num_prompt_logprob_events, 1) << log.id;
    }
  }

  LlmEngine& engine_;
  std::mt19937_64 rng_;
  std::mt19937_64 hook_rng_;  // engine thread only
  std::vector<std::vector<int32_t>> prefixes_;
  std::vector<TestRequest> added_;
  std::vector<std::shared_ptr<RequestLog>> logs_;
  int next_id_ = 0;
};

void run_stress(const StressConfig& c, uint64_t seed) {
  EngineSetup s{.model = stories_dir(),
                .num_kv_blocks = 24,
                .max_num_seqs = 8,
                .max_num_batched_tokens = 48,
                .max_chunk_tokens = c.max_chunk_tokens};
  if (!c.speculative.empty()) {
    Result<SpeculativeConfig> spec = parse_speculative_config(c.speculative);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    s.speculative = *spec;
  }
  auto engine = start_engine(s);
  ASSERT_NE(engine, nullptr);
  Stress stress(*engine, seed);
  stress.run(c.num_ops / kOpsScale);
  if (!c.speculative.empty()) EXPECT_GT(engine->metrics().spec_num_accepted_tokens, 0u);
}

TEST(EngineStress, RandomAddsAndAborts) {
  run_stress({}, 1);
}

TEST(EngineStress, RandomAddsAndAbortsWithSmallChunks) {
  run_stress({.num_ops = 1500, .max_chunk_tokens = 5}, 2);
}

// Suffix decoding learns from every ended sequence (finished, aborted,
// dropped beams) and drafts into the tiny pool and budget.
TEST(EngineStress, RandomAddsAndAbortsWithSpeculation) {
  run_stress({.num_ops = 1500,
              .max_chunk_tokens = 7,
              .speculative = R"({"method": "suffix", "num_speculative_tokens": 4})"},
             3);
}

}  // namespace
}  // namespace pagoda::test
