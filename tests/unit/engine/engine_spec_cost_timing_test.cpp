// The back-off's cost-aware cap (engine/spec_cost_policy.h) with async
// scheduling, its steps timed by a simulated device: a runner wrapper
// (SimulatedRunner) advances the policy's fake clock by each step's cost, a
// plain step 1 ms and one that verifies drafts 1 + r ms, either at launch
// (kAtLaunch, as the CPU backend computes a step in launch()) or on a device
// queue that collect() waits for (kOnDevice, as CUDA runs it between launch
// and collect). Every draft is rejected. With miss_cost_budget 0.04 the cap
// must reach 32 when r = 1 and stay 8 when r = 0, for both: the step()
// before a verifying step, held for its drafts, belongs to its window.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <memory>

#include "engine_harness.h"
#include "forwarding_runner.h"
#include "spec/random_proposer.h"

namespace pagoda::test {
namespace {

using Clock = SpecCostPolicy::Clock;
using ms = std::chrono::milliseconds;

enum class Timing { kAtLaunch, kOnDevice };

// The simulated time: `now` is what the policy's clock reads; the device is
// busy until device_free; done[slot] is when the step on `slot` ends.
struct SimClock {
  Timing timing = Timing::kAtLaunch;
  ms verify_extra{0};  // r x 1 ms
  Clock::time_point now{}, device_free{};
  std::array<Clock::time_point, 2> done{};
};

// Forwards to the loaded runner; launch() and collect() move the clock.
class SimulatedRunner final : public ForwardingRunner {
 public:
  SimulatedRunner(std::unique_ptr<Runner> inner, std::shared_ptr<SimClock> clock)
      : ForwardingRunner(std::move(inner)), clock_(std::move(clock)) {}

  Status launch(const StepBatch& step, int slot) override {
    PAGODA_RETURN_IF_ERROR(ForwardingRunner::launch(step, slot));
    // Drafts: more logits rows than sequences.
    const bool verifies = step.logits_rows.size() + 1 > step.query_start_loc.size();
    const auto cost = ms(1) + (verifies ? clock_->verify_extra : ms(0));
    SimClock& c = *clock_;
    if (c.timing == Timing::kAtLaunch) {
      c.now += cost;
      c.done[static_cast<size_t>(slot)] = c.now;
    } else {
      c.device_free = std::max(c.device_free, c.now) + cost;
      c.done[static_cast<size_t>(slot)] = c.device_free;
    }
    return Status::Ok();
  }
  Status collect(int slot, SampleOutput* out) override {
    clock_->now = std::max(clock_->now, clock_->done[static_cast<size_t>(slot)]);
    return ForwardingRunner::collect(slot, out);
  }

 private:
  std::shared_ptr<SimClock> clock_;
};

// The metrics at the end of 8 greedy requests of 160 tokens with random
// drafts (k = 4), async scheduling on; `accept_all`: every draft accepted
// (a proposer that hits), else every one rejected.
EngineMetrics run_requests(Timing timing, int r, double budget = 0.04, bool accept_all = false) {
  auto clock = std::make_shared<SimClock>();
  clock->timing = timing;
  clock->verify_extra = ms(r);
  EngineSetup s{.model = stories_dir()};
  s.async_scheduling = true;
  s.speculative.num_speculative_tokens = 4;
  s.speculative.miss_cost_budget = budget;
  s.proposer = [] { return std::make_unique<RandomProposer>(512, 9); };
  s.acceptance_rule = [accept_all](std::span<const int32_t>, std::span<const int32_t> drafts) {
    return accept_all ? static_cast<int32_t>(drafts.size()) : 0;
  };
  s.spec_cost_clock = [clock] { return clock->now; };
  s.wrap_runner = [clock](std::unique_ptr<Runner> inner) -> std::unique_ptr<Runner> {
    return std::make_unique<SimulatedRunner>(std::move(inner), clock);
  };
  auto engine = start_engine(s);
  if (engine == nullptr) return {};
  std::vector<TestRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    SamplingParams p = greedy_params(160);
    p.ignore_eos = true;
    reqs.push_back({"t" + std::to_string(i), {1, 10 + i, 20 + i, 30}, p});
  }
  const auto logs = run_all(*engine, reqs);
  EXPECT_EQ(logs.size(), reqs.size());
  if (!accept_all) {
    EXPECT_EQ(engine->metrics().spec_num_accepted_tokens, 0u);
    EXPECT_GT(engine->metrics().overlapped_steps, 100);  // async scheduling ran ahead
  }
  return engine->metrics();
}

int32_t final_cap(Timing timing, int r) {
  return run_requests(timing, r).spec_backoff_cap;
}

TEST(EngineSpecCostTiming, CapRisesOnlyWhenVerificationCostsWithStepsComputedAtLaunch) {
  EXPECT_EQ(final_cap(Timing::kAtLaunch, 1), 32);
  EXPECT_EQ(final_cap(Timing::kAtLaunch, 0), 8);
}

TEST(EngineSpecCostTiming, CapRisesOnlyWhenVerificationCostsWithStepsOnADeviceQueue) {
  EXPECT_EQ(final_cap(Timing::kOnDevice, 1), 32);
  EXPECT_EQ(final_cap(Timing::kOnDevice, 0), 8);
}

// Drafts that are never accepted: each sample's waits grow to kMaxCap (64)
// whatever the cost, so it verifies about 8 times in 160 tokens (the ramp
// 1, 2, ..., 64 and an aligned try or two), against about 20 + 4 with the
// fixed cap 8 of a zero budget; r is measured and shown all the same.
// Drafts that are always accepted keep being drafted every step: a
// verification yields k + 1 = 5 tokens, so about 160 / 5 per sample.
TEST(EngineSpecCostTiming, NeverAcceptedDraftsBackOffToTheLongestCapAcceptedOnesKeepDrafting) {
  const EngineMetrics missing = run_requests(Timing::kOnDevice, 1);
  const EngineMetrics fixed = run_requests(Timing::kOnDevice, 1, /*budget=*/0.0);
  EXPECT_LE(missing.spec_num_drafts, 8u * 10);
  EXPECT_GE(fixed.spec_num_drafts, 8u * 20);
  ASSERT_TRUE(missing.spec_verify_extra_cost.has_value());
  EXPECT_NEAR(*missing.spec_verify_extra_cost, 1.0, 0.1);
  EXPECT_EQ(missing.spec_backoff_cap, 32);
  const EngineMetrics hits = run_requests(Timing::kOnDevice, 1, 0.04, /*accept_all=*/true);
  EXPECT_GE(hits.spec_num_drafts, 8u * 30);
  EXPECT_GT(hits.spec_num_accepted_tokens, 3 * hits.spec_num_drafts);  // max_tokens cuts the last
}

}  // namespace
}  // namespace pagoda::test
