// The back-off's cost-aware cap through the engine (engine/spec_cost_policy.h):
// a fake step clock makes every drafting step cost two plain ones (r = 1),
// drafts are all rejected, and the requests start a few steps apart (chunked
// prefills). With miss_cost_budget 0.04 the cap becomes 32 and the samples,
// out of phase at first, verify together once per 64 steps (none of their
// drafts was ever accepted: they back off to SpecBackoff::kMaxCap whatever
// the cost); with budget 0 the cap stays 8 and they verify once per 8. Greedy outputs equal those of the engine without speculation.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "engine_harness.h"
#include "spec/random_proposer.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

using Clock = SpecCostPolicy::Clock;

// What the drafting steps saw: per propose() call, each drafted sequence's
// number of output tokens then (one more per step, as nothing is accepted);
// `drafted` is set by a call and cleared by the fake clock.
// `cap` / `r`: pagoda:spec_backoff_cap and spec_verify_extra_cost
// (EngineMetrics) at each call.
struct DraftLog {
  const Engine* engine = nullptr;  // set before the first request
  bool drafted = false;
  std::vector<std::map<int64_t, int64_t>> calls;  // [call] seq_id -> output tokens
  std::vector<int32_t> cap;                       // [call]
  std::vector<std::optional<double>> r;           // [call]
};

// RandomProposer's drafts, logged.
class LoggedRandomProposer final : public Proposer {
 public:
  explicit LoggedRandomProposer(std::shared_ptr<DraftLog> log)
      : inner_(512, 9), log_(std::move(log)) {}

  Status propose(std::span<const DraftInput> inputs,
                 std::vector<std::vector<int32_t>>& drafts) override {
    auto& call = log_->calls.emplace_back();
    for (const DraftInput& in : inputs)
      call[in.seq_id] = static_cast<int64_t>(in.tokens.size()) - in.num_prompt_tokens;
    log_->cap.push_back(log_->engine->metrics().spec_backoff_cap);
    log_->r.push_back(log_->engine->metrics().spec_verify_extra_cost);
    log_->drafted = true;
    return inner_.propose(inputs, drafts);
  }

 private:
  RandomProposer inner_;
  std::shared_ptr<DraftLog> log_;
};

constexpr int32_t kMaxTokens = 320;
constexpr int kNumRequests = 8;
constexpr int32_t kChunk = 4;  // prefill chunks: the prompts' prefills end steps apart

std::vector<TestRequest> requests() {
  auto tok = Tokenizer::load(stories_dir());
  EXPECT_TRUE(tok.ok());
  if (!tok.ok()) return {};
  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. One day, she saw a big, red ball.";
  std::vector<TestRequest> out;
  for (int i = 0; i < kNumRequests; ++i) {
    SamplingParams p = greedy_params(kMaxTokens);
    p.ignore_eos = true;
    // Prompts of different lengths: their chunked prefills end in different steps.
    out.push_back({"c" + std::to_string(i),
                   (*tok)->encode(story.substr(0, 20 + static_cast<size_t>(i) * 13)), p});
  }
  return out;
}

// The engine with the logged proposer, every draft rejected, and a step clock
// that ticks 1 ms per reading plus 1 ms after a propose() call: a plain step
// takes 1 ms, a drafting step 2 ms.
std::unique_ptr<LlmEngine> start(double budget, std::shared_ptr<DraftLog> log) {
  EngineSetup s{.model = stories_dir()};
  s.max_chunk_tokens = kChunk;
  s.speculative.num_speculative_tokens = 4;
  s.speculative.miss_cost_budget = budget;
  s.proposer = [log] { return std::make_unique<LoggedRandomProposer>(log); };
  s.acceptance_rule = [](std::span<const int32_t>, std::span<const int32_t>) { return 0; };
  auto now = std::make_shared<Clock::time_point>();
  s.spec_cost_clock = [log, now] {
    *now += std::chrono::milliseconds(log->drafted ? 2 : 1);
    log->drafted = false;
    return *now;
  };
  return start_engine(s);
}

TEST(EngineSpecBackoffCap, RejectedDraftsVerifyTogetherOncePerMeasuredCap) {
  const std::vector<TestRequest> reqs = requests();
  ASSERT_EQ(reqs.size(), static_cast<size_t>(kNumRequests));
  std::vector<std::vector<int32_t>> plain;
  {
    auto engine = start_engine({.model = stories_dir(), .max_chunk_tokens = kChunk});
    ASSERT_NE(engine, nullptr);
    for (const auto& log : run_all(*engine, reqs)) plain.push_back(log->samples[0].tokens);
  }
  for (const double budget : {0.04, 0.0}) {
    const int32_t cap = budget > 0 ? 32 : 8;        // the cost-aware cap (metrics)
    const int32_t interval = budget > 0 ? 64 : 8;  // never accepted: kMaxCap
    SCOPED_TRACE(::testing::Message() << "budget " << budget);
    auto log = std::make_shared<DraftLog>();
    auto engine = start(budget, log);
    ASSERT_NE(engine, nullptr);
    log->engine = engine.get();
    const auto logs = run_all(*engine, reqs);
    ASSERT_EQ(logs.size(), plain.size());
    for (size_t i = 0; i < logs.size(); ++i)
      EXPECT_EQ(logs[i]->samples[0].tokens, plain[i]) << "request " << i;
    EXPECT_EQ(engine->metrics().spec_num_accepted_tokens, 0u);

    // The prefills end in different steps: the first drafting steps are not
    // shared by every sample.
    ASSERT_FALSE(log->calls.empty());
    EXPECT_LT(log->calls.front().size(), static_cast<size_t>(kNumRequests));
    // Steady state (after the ramp 1, 2, 4, ... and the first aligned try):
    // every drafting step has every sample not finished yet (a sample
    // missing from one never drafts again), `interval` steps after its
    // previous one, and /metrics shows the cap.
    std::set<int64_t> seqs, finished;
    for (const auto& call : log->calls)
      for (const auto& entry : call) seqs.insert(entry.first);
    ASSERT_EQ(seqs.size(), static_cast<size_t>(kNumRequests));
    const size_t num_steady = static_cast<size_t>(std::max(120 / interval, 2));
    ASSERT_GT(log->calls.size(), num_steady + 1);
    size_t num_full = 0, num_measured = 0;
    for (size_t c = log->calls.size() - num_steady; c < log->calls.size(); ++c) {
      const auto& call = log->calls[c];
      const auto& prev = log->calls[c - 1];
      num_full += call.size() == static_cast<size_t>(kNumRequests);
      EXPECT_EQ(log->cap[c], cap) << "call " << c;
      // The r the cap came from: a drafting step costs 2 plain ones. With a
      // budget of 0 it is measured all the same (the cap just stays 8), but
      // a batch size reached late (requests finishing) may not be yet.
      if (budget > 0) ASSERT_TRUE(log->r[c].has_value()) << "call " << c;
      if (log->r[c]) {
        EXPECT_NEAR(*log->r[c], 1.0, 0.05) << "call " << c;
        ++num_measured;
      }
      for (int64_t seq : seqs) {
        if (!call.contains(seq)) {
          finished.insert(seq);
          continue;
        }
        EXPECT_FALSE(finished.contains(seq)) << "call " << c << ", sequence " << seq;
        ASSERT_TRUE(prev.contains(seq)) << "call " << c << ", sequence " << seq;
        EXPECT_EQ(call.at(seq) - prev.at(seq), interval) << "call " << c << ", sequence " << seq;
      }
    }
    EXPECT_GE(num_full * 2, num_steady);
    EXPECT_GE(num_measured * 2, num_steady);
    // So the drafting steps are few: the ramp (about log2(interval) + 2 per
    // sample) and one in `interval` of the ~kMaxTokens steps after it.
    EXPECT_LE(log->calls.size(), static_cast<size_t>(kNumRequests * 8 + kMaxTokens / interval));
  }
}

}  // namespace
}  // namespace pagoda::test
