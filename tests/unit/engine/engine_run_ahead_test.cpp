// The adaptive run-ahead rule in the engine (engine/run_ahead_policy.h), on
// stories260K with a fake clock that never advances (a busy arrival keeps
// its window open): a lone request decodes overlapped; at light load after a
// busy arrival steps are not planned ahead and a request submitted during a
// step joins the next one; a batch at the threshold overlaps. Tokens are
// those of --no-async-scheduling in every case.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine_harness.h"

namespace pagoda::test {
namespace {

SamplingParams long_greedy(int32_t max_tokens) {
  SamplingParams p = greedy_params(max_tokens);
  p.ignore_eos = true;
  return p;
}

EngineSetup setup(bool async, int64_t small_batch) {
  return {.model = stories_dir(),
          .async_scheduling = async,
          .run_ahead = {.small_batch = small_batch, .arrival_window_s = 2.0},
          .run_ahead_clock = [] { return Clock::time_point{}; }};
}

void wait_done(const std::vector<std::shared_ptr<RequestLog>>& logs) {
  for (const auto& log : logs) {
    while (!log->done()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::vector<int32_t> tokens_of(const RequestLog& log) {
  std::lock_guard<std::mutex> lock(log.mu);
  return log.samples[0].tokens;
}

const std::vector<int32_t> kPromptA = {1, 403, 407, 256, 310};
const std::vector<int32_t> kPromptB = {1, 300, 280};
const std::vector<int32_t> kPromptC = {1, 350, 290, 270};

// What the light-load scenario saw.
struct LightLoad {
  std::vector<std::vector<int32_t>> tokens;  // A, B, C
  uint64_t steps_to_c = 0;  // steps completed from C's submit to C's first token
  EngineMetrics metrics;
};

// A (40 tokens) alone; at its 5th token B arrives (busy: the window opens);
// at its 15th C arrives, from A's sink on the engine thread while step N is
// applied (async: N+1 already launched). Steps are counted from the engine's
// metrics, which count a step once collected.
LightLoad light_load(bool async, int64_t small_batch) {
  LightLoad r;
  auto engine = start_engine(setup(async, small_batch));
  if (engine == nullptr) return r;
  std::vector<std::shared_ptr<RequestLog>> logs(3);
  std::mutex mu;  // logs[1..2], written on the engine thread
  std::atomic<int> a_tokens{0};
  std::atomic<uint64_t> steps_at_submit{0}, steps_at_first{0};
  auto c_hook = [&](const RequestOutput& ev) {
    if (!ev.token_ids.empty() && steps_at_first.load() == 0)
      steps_at_first = engine->metrics().steps.steps;
  };
  auto a_hook = [&](const RequestOutput& ev) {
    const int n = a_tokens += static_cast<int>(ev.token_ids.size());
    if (n == 5 && ev.token_ids.size() == 1) {
      auto b = submit(*engine, {"B", kPromptB, long_greedy(10)});
      std::lock_guard<std::mutex> lock(mu);
      if (b.ok()) logs[1] = b.value();
    } else if (n == 15 && ev.token_ids.size() == 1) {
      steps_at_submit = engine->metrics().steps.steps;
      auto c = submit(*engine, {"C", kPromptC, long_greedy(5)}, c_hook);
      std::lock_guard<std::mutex> lock(mu);
      if (c.ok()) logs[2] = c.value();
    }
  };
  auto a = submit(*engine, {"A", kPromptA, long_greedy(40)}, a_hook);
  if (!a.ok()) {
    ADD_FAILURE() << a.error().message;
    return r;
  }
  logs[0] = a.value();
  wait_done({logs[0]});
  {
    std::lock_guard<std::mutex> lock(mu);
    if (logs[1] == nullptr || logs[2] == nullptr) {
      ADD_FAILURE() << "B or C not submitted";
      return r;
    }
  }
  wait_done(logs);
  for (const auto& log : logs) {
    expect_complete(*log);
    r.tokens.push_back(tokens_of(*log));
  }
  expect_idle_and_empty(*engine);
  r.steps_to_c = steps_at_first.load() - steps_at_submit.load();
  r.metrics = engine->metrics();
  return r;
}

TEST(EngineRunAhead, ALoneRequestDecodesOverlapped) {
  auto engine = start_engine(setup(true, 16));
  ASSERT_NE(engine, nullptr);
  auto logs = run_all(*engine, {{"alone", kPromptA, long_greedy(40)}});
  const EngineMetrics m = engine->metrics();
  EXPECT_EQ(m.held_steps, 0u);
  // Every step but the last (nothing left to plan) overlapped its successor.
  EXPECT_GE(m.overlapped_steps + 1, m.steps.steps);
  EXPECT_EQ(logs[0]->samples[0].tokens.size(), 40u);
}

TEST(EngineRunAhead, AtLightLoadAnArrivalJoinsTheNextStep) {
  const LightLoad sync = light_load(false, 16);
  const LightLoad held = light_load(true, 16);
  const LightLoad ahead = light_load(true, 0);  // the rule off
  ASSERT_EQ(sync.tokens.size(), 3u);
  ASSERT_EQ(held.tokens.size(), 3u);
  ASSERT_EQ(ahead.tokens.size(), 3u);
  EXPECT_EQ(sync.steps_to_c, 1u);
  EXPECT_EQ(held.steps_to_c, 1u);  // C in step N+1, as without async scheduling
  EXPECT_EQ(ahead.steps_to_c, 2u);  // C in step N+2: what the rule avoids
  // Held: A's first steps (before B) overlap; after B's arrival none does.
  EXPECT_GE(held.metrics.overlapped_steps, 3u);
  EXPECT_LE(held.metrics.overlapped_steps, 6u);
  EXPECT_GE(held.metrics.held_steps + 8, held.metrics.steps.steps);
  EXPECT_EQ(ahead.metrics.held_steps, 0u);
  EXPECT_EQ(sync.metrics.held_steps, 0u);  // not eligible: not counted
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(held.tokens[i], sync.tokens[i]) << i;
    EXPECT_EQ(ahead.tokens[i], sync.tokens[i]) << i;
  }
}

// Eight requests arrive busy while A decodes; the batch (9) is at least
// small_batch 4 and overlaps; with small_batch 16 the same batch is held.
TEST(EngineRunAhead, ABatchAtTheThresholdOverlaps) {
  std::vector<std::vector<int32_t>> want;
  for (int64_t small_batch : {int64_t{-1}, int64_t{4}, int64_t{16}}) {
    auto engine = start_engine(setup(small_batch >= 0, small_batch < 0 ? 0 : small_batch));
    ASSERT_NE(engine, nullptr);
    std::mutex mu;
    std::vector<std::shared_ptr<RequestLog>> logs;  // A, then the batch
    std::shared_ptr<RequestLog> a_log;              // logs[0], read here unlocked
    auto a_hook = [&](const RequestOutput& ev) {
      if (ev.token_ids.size() != 1) return;
      std::lock_guard<std::mutex> lock(mu);
      if (logs.size() != 1 || logs[0]->samples[0].tokens.size() != 2) return;
      for (int i = 0; i < 8; ++i) {
        auto r = submit(*engine, {"r" + std::to_string(i), {1, 300 + 7 * i, 280}, long_greedy(24)});
        if (r.ok()) logs.push_back(r.value());
      }
    };
    {
      std::lock_guard<std::mutex> lock(mu);
      auto a = submit(*engine, {"A", kPromptA, long_greedy(26)}, a_hook);
      ASSERT_TRUE(a.ok());
      a_log = a.value();
      logs.push_back(a_log);
    }
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (logs.size() == 9) break;
      }
      ASSERT_FALSE(a_log->done()) << "the batch was not submitted";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    wait_done(logs);
    std::vector<std::vector<int32_t>> got;
    for (const auto& log : logs) {
      expect_complete(*log);
      got.push_back(tokens_of(*log));
    }
    expect_idle_and_empty(*engine);
    const EngineMetrics m = engine->metrics();
    if (small_batch < 0) {
      want = got;  // --no-async-scheduling
      continue;
    }
    EXPECT_EQ(got, want) << small_batch;
    if (small_batch == 4) {
      // A's first steps and the batch's overlap; the tail of fewer than 4 may not.
      EXPECT_GE(m.overlapped_steps + 4, m.steps.steps);
      EXPECT_GT(m.overlapped_steps, 20u);
    } else {
      EXPECT_GT(m.held_steps, 20u);
    }
  }
}

}  // namespace
}  // namespace pagoda::test
