// Admission under overload: add_request's gate is exact. Requests it accepts
// run to a normal finish (never refused later on the engine thread with an
// abort event); the ones it refuses get kResourceExhausted at once.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "engine_harness.h"

namespace pagoda::test {
namespace {

TEST(EngineAdmission, BurstFromManyThreadsEitherFinishesNormallyOrIsRefusedUpFront) {
  EngineSetup setup;
  setup.model = stories_dir();
  setup.max_num_seqs = 16;
  setup.max_waiting_requests = 32;
  std::unique_ptr<LlmEngine> engine = start_engine(setup);
  ASSERT_NE(engine, nullptr);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 150;
  SamplingParams params;
  params.temperature = 0.0f;
  params.max_tokens = 8;
  params.ignore_eos = true;
  std::mutex mu;
  std::vector<std::shared_ptr<RequestLog>> accepted;
  std::atomic<int> refused{0};
  std::atomic<int> other_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        TestRequest r{fmt::format("t{}-{}", t, i), {1, 403, 407, 261, 378}, params};
        auto log = submit(*engine, r);
        if (log.ok()) {
          std::lock_guard lock(mu);
          accepted.push_back(*log);
        } else if (log.error().code == ErrorCode::kResourceExhausted) {
          ++refused;
        } else {
          ++other_errors;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  expect_idle_and_empty(*engine);
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_GT(refused.load(), 0) << "the burst never filled the queue";
  EXPECT_GE(accepted.size(), 32u);
  int aborted = 0;
  for (const auto& log : accepted) {
    expect_complete(*log);
    std::lock_guard lock(log->mu);
    const SampleLog& s = log->samples[0];
    if (s.finish != FinishReason::kLength || !s.error.empty() || s.tokens.size() != 8) {
      ++aborted;
      if (aborted <= 3) ADD_FAILURE() << log->id << ": accepted but ended with '" << s.error << "' after "
                                      << s.tokens.size() << " tokens";
    }
  }
  EXPECT_EQ(aborted, 0) << "of " << accepted.size() << " accepted requests";
}

}  // namespace
}  // namespace pagoda::test
