// A tensor-parallel rank that fails mid-run (its device lost, say) while the
// other rank already waits for it in that step's all-reduces: the engine
// fails the running requests with the failing rank's error, fails every
// later request the same way, and neither it nor its shutdown hangs. CPU
// ranks (threads; parallel/cpu_communicator.h) over stories260K.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "engine_harness.h"
#include "finishes_within.h"
#include "forwarding_runner.h"
#include "io/model_files.h"
#include "io/model_location.h"
#include "model/parallel_runner.h"
#include "parallel/cpu_communicator.h"

namespace pagoda::test {
namespace {

constexpr const char* kFailure = "injected: device lost";

// A rank's ModelRunner whose launches fail from the `fail_from`-th on,
// before its forward (so its peers wait for it in their forwards).
class FailingRank final : public ForwardingRunner {
 public:
  FailingRank(std::unique_ptr<Runner> inner, int fail_from)
      : ForwardingRunner(std::move(inner)), fail_from_(fail_from) {}

  Status launch(const StepBatch& step, int slot) override {
    if (++launches_ >= fail_from_) return make_error(ErrorCode::kInternal, kFailure);
    return ForwardingRunner::launch(step, slot);
  }

 private:
  int fail_from_;
  int launches_ = 0;
};

// Waits until every log has its final events (false after `limit`).
bool wait_done(const std::vector<std::shared_ptr<RequestLog>>& logs, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (const auto& log : logs) {
    while (!log->done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return true;
}

TEST(EngineRankFailure, ARankFailingMidRunFailsTheRequestsWithItsErrorAndNothingHangs) {
  if (on_cuda()) GTEST_SKIP() << "cpu ranks only";
  EXPECT_TRUE(finishes_within(std::chrono::seconds(120), [] {
    // The engine's parts for one rank (tokenizer, scheduler config); the
    // runner is then replaced by two ranks, rank 1 failing at its 4th step.
    set_log_level(LogLevel::kError);
    EngineOptions o;
    o.model = stories_dir();
    o.device = "cpu";
    o.num_kv_blocks = 256;
    o.max_num_seqs = 32;
    o.max_num_batched_tokens = 256;
    o.async_scheduling = true;
    Result<EngineParts> parts = load_engine_parts(o);
    ASSERT_TRUE(parts.ok()) << parts.error().message;
    Result<ModelLocation> location = resolve_model(stories_dir());
    ASSERT_TRUE(location.ok()) << location.error().message;
    auto opened = std::make_shared<OpenedModel>();
    {
      Result<OpenedModel> r = open_model(*location);
      ASSERT_TRUE(r.ok()) << r.error().message;
      *opened = std::move(r).value();
    }
    RankResources resources;
    resources.communicators = create_cpu_communicators(2);
    std::vector<Backend*> backends;
    std::vector<Communicator*> comms;
    for (int r = 0; r < 2; ++r) {
      resources.backends.push_back(create_cpu_backend());
      backends.push_back(resources.backends.back().get());
      comms.push_back(resources.communicators[static_cast<size_t>(r)].get());
    }
    const ParallelRunner::RankFactory make = [&](int r) -> Result<std::unique_ptr<Runner>> {
      RunnerOptions ro;
      ro.block_size = o.block_size;
      ro.num_kv_blocks = o.num_kv_blocks;
      ro.max_num_seqs = o.max_num_seqs;
      ro.max_num_batched_tokens = o.max_num_batched_tokens;
      ro.tp = comms[static_cast<size_t>(r)];
      PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> m,
                              ModelRunner::create(*backends[static_cast<size_t>(r)], opened->config,
                                                  *opened->weights, ro));
      if (r == 0) return std::unique_ptr<Runner>(std::move(m));
      return std::unique_ptr<Runner>(std::make_unique<FailingRank>(std::move(m), 4));
    };
    auto runner = ParallelRunner::create(2, make, std::move(resources));
    ASSERT_TRUE(runner.ok()) << runner.error().message;
    parts->runner = std::move(runner).value();
    parts->options.tensor_parallel_size = 2;
    Result<std::unique_ptr<LlmEngine>> engine = LlmEngine::start(std::move(parts).value());
    ASSERT_TRUE(engine.ok()) << engine.error().message;

    const std::string want = std::string("tensor-parallel rank 1: ") + kFailure;
    std::vector<std::shared_ptr<RequestLog>> logs;
    for (int i = 0; i < 3; ++i) {
      SamplingParams p;
      p.max_tokens = 32;
      p.temperature = 0.0f;
      p.ignore_eos = true;
      auto log = submit(**engine, {"r" + std::to_string(i), {1, 40 + i, 50, 60}, p});
      ASSERT_TRUE(log.ok()) << log.error().message;
      logs.push_back(*log);
    }
    ASSERT_TRUE(wait_done(logs, std::chrono::seconds(60)));
    for (const auto& log : logs) {
      EXPECT_EQ(log->samples[0].finish, FinishReason::kAbort) << log->id;
      EXPECT_EQ(log->samples[0].error, want) << log->id;
      EXPECT_LT(log->samples[0].tokens.size(), 32u) << log->id;
    }
    // The runner stays failed: a later request fails the same way at once.
    SamplingParams p;
    p.max_tokens = 4;
    auto later = submit(**engine, {"later", {1, 2, 3}, p});
    ASSERT_TRUE(later.ok()) << later.error().message;
    ASSERT_TRUE(wait_done({*later}, std::chrono::seconds(30)));
    EXPECT_EQ((*later)->samples[0].error, want);
    engine->reset();  // shuts down: the ranks' threads end
  }));
}

}  // namespace
}  // namespace pagoda::test
