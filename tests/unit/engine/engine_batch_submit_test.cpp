// Engine::add_requests: a batch is queued all or none, and LlmEngine takes an
// accepted batch into the same step (pagoda generate --input relies on it, so
// that a rerun of a batch schedules the same steps).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "engine_harness.h"

namespace pagoda::test {
namespace {

std::vector<TestRequest> batch_of(int n, const std::string& prefix, int32_t max_tokens) {
  SamplingParams params = greedy_params(max_tokens);
  params.ignore_eos = true;
  std::vector<TestRequest> rs;
  for (int i = 0; i < n; ++i)
    rs.push_back({fmt::format("{}{}", prefix, i), {1, 403, 407, 261, static_cast<int32_t>(300 + i)},
                  params});
  return rs;
}

EngineSetup one_step_setup() {
  EngineSetup setup;
  setup.model = stories_dir();
  setup.max_num_seqs = 16;
  setup.max_num_batched_tokens = 256;  // 12 five-token prompts fit one step
  setup.async_scheduling = false;      // no step planned ahead of the first
  return setup;
}

// 12 requests of one token each: taken together, one step prefills all of
// them and samples their only token. Added one by one, the engine thread,
// woken by the first, may start a step before the others are queued.
TEST(EngineBatchSubmit, AcceptedBatchRunsInOneStep) {
  for (int round = 0; round < 5; ++round) {
    std::unique_ptr<LlmEngine> engine = start_engine(one_step_setup());
    ASSERT_NE(engine, nullptr);
    Result<std::vector<std::shared_ptr<RequestLog>>> logs =
        submit_batch(*engine, batch_of(12, "r", 1));
    ASSERT_TRUE(logs.ok()) << logs.error().message;
    expect_idle_and_empty(*engine);
    for (const auto& log : *logs) expect_complete(*log);
    EXPECT_EQ(engine->metrics().steps.steps, 1u) << "round " << round;
  }
}

// Nothing of a refused batch is queued: the engine stays without requests and
// steps, and the error names the refused request's index.
TEST(EngineBatchSubmit, RefusedBatchQueuesNothing) {
  EngineSetup setup = one_step_setup();
  setup.max_waiting_requests = 4;
  std::unique_ptr<LlmEngine> engine = start_engine(setup);
  ASSERT_NE(engine, nullptr);
  auto expect_nothing_queued = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const EngineMetrics m = engine->metrics();
    EXPECT_EQ(m.steps.steps, 0u);
    EXPECT_EQ(m.num_waiting + m.num_running, 0);
  };
  {  // an empty prompt in third place
    std::vector<TestRequest> rs = batch_of(3, "a", 2);
    rs[2].prompt.clear();
    size_t failed = 99;
    auto logs = submit_batch(*engine, rs, &failed);
    ASSERT_FALSE(logs.ok());
    EXPECT_EQ(logs.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(failed, 2u);
    expect_nothing_queued();
  }
  {  // the same id twice in one batch
    std::vector<TestRequest> rs = batch_of(3, "b", 2);
    rs[1].id = rs[0].id;
    size_t failed = 99;
    auto logs = submit_batch(*engine, rs, &failed);
    ASSERT_FALSE(logs.ok());
    EXPECT_EQ(logs.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(logs.error().message.find("already in use"), std::string::npos) << logs.error().message;
    EXPECT_EQ(failed, 1u);
    expect_nothing_queued();
  }
  {  // more than the waiting bound (4) at once
    size_t failed = 99;
    auto logs = submit_batch(*engine, batch_of(6, "c", 2), &failed);
    ASSERT_FALSE(logs.ok());
    EXPECT_EQ(logs.error().code, ErrorCode::kResourceExhausted);
    EXPECT_EQ(failed, 4u);
    expect_nothing_queued();
  }
  // Refusals left no ids behind: the first batch's ids are free again.
  auto logs = submit_batch(*engine, batch_of(3, "a", 2));
  ASSERT_TRUE(logs.ok()) << logs.error().message;
  expect_idle_and_empty(*engine);
  for (const auto& log : *logs) {
    expect_complete(*log);
    std::lock_guard<std::mutex> lock(log->mu);
    EXPECT_EQ(log->samples[0].tokens.size(), 2u) << log->id;
  }
}

}  // namespace
}  // namespace pagoda::test
