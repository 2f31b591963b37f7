// SpecCostPolicy: the back-off cap from measured step times, with a fake
// clock and with step times recorded directly.
#include "engine/spec_cost_policy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "spec/backoff.h"

namespace pagoda {
namespace {

using Clock = SpecCostPolicy::Clock;

struct FakeClock {
  Clock::time_point t{};
  void advance(double s) {
    t += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
};

TEST(SpecCostPolicy, CapIsTheNextPowerOfTwoOfCostOverBudgetWithinEightAndSixtyFour) {
  EXPECT_EQ(SpecCostPolicy::cap_for(1.0, 0.04), 32);   // 25 steps -> 32
  EXPECT_EQ(SpecCostPolicy::cap_for(0.2, 0.04), 8);    // 5 -> the least cap
  EXPECT_EQ(SpecCostPolicy::cap_for(0.32, 0.04), 8);   // exactly 8
  EXPECT_EQ(SpecCostPolicy::cap_for(0.33, 0.04), 16);  // 8.25 -> 16
  EXPECT_EQ(SpecCostPolicy::cap_for(0.6, 0.04), 16);
  EXPECT_EQ(SpecCostPolicy::cap_for(2.5, 0.04), 64);  // 62.5 -> 64
  EXPECT_EQ(SpecCostPolicy::cap_for(3.0, 0.04), 64);  // 75 -> clamped
  EXPECT_EQ(SpecCostPolicy::cap_for(1e300, 0.04), 64);
  EXPECT_EQ(SpecCostPolicy::cap_for(1.0, 0.1), 16);  // 10 -> 16
  // No cost, a verifying step cheaper than a plain one, or no budget: the least cap.
  EXPECT_EQ(SpecCostPolicy::cap_for(0.0, 0.04), SpecBackoff::kMinCap);
  EXPECT_EQ(SpecCostPolicy::cap_for(-0.3, 0.04), SpecBackoff::kMinCap);
  EXPECT_EQ(SpecCostPolicy::cap_for(NAN, 0.04), SpecBackoff::kMinCap);
  EXPECT_EQ(SpecCostPolicy::cap_for(1.0, 0.0), SpecBackoff::kMinCap);
}

TEST(SpecCostPolicy, NothingMeasuredMeansTheLeastCap) {
  SpecCostPolicy p(0.04);
  EXPECT_EQ(p.cap(64), 8);
  EXPECT_FALSE(p.extra_cost(64));
  p.record(64, 0.010, /*num_verifying=*/0);  // plain steps only: r unknown
  EXPECT_EQ(p.cap(64), 8);
  EXPECT_FALSE(p.extra_cost(64));
  SpecCostPolicy q(0.04);
  q.record(64, 0.020, /*num_verifying=*/64);  // verifying steps only
  EXPECT_EQ(q.cap(64), 8);
  q.record(64, 0.0, /*num_verifying=*/0);  // a zero time is no measurement
  EXPECT_EQ(q.cap(64), 8);
}

// Steps timed by the fake clock: at batch 64 a verifying step costs two
// plain ones (r = 1: cap 32); batch 1's bucket keeps its own averages.
TEST(SpecCostPolicy, TimesStepsWithItsClockPerBatchBucket) {
  FakeClock c;
  SpecCostPolicy p(0.04, [&c] { return c.t; });
  auto run_step = [&](size_t num_seqs, double seconds, bool decode_only, bool verifying) {
    p.step_started();
    c.advance(seconds);
    p.step_finished(
        num_seqs, verifying ? num_seqs : 0, decode_only,
        verifying ? SpecCostPolicy::StepKind::kVerifying : SpecCostPolicy::StepKind::kPlain);
  };
  for (int i = 0; i < 20; ++i) run_step(64, 0.010, true, false);
  run_step(64, 0.020, true, true);
  ASSERT_TRUE(p.extra_cost(64));
  EXPECT_NEAR(*p.extra_cost(64), 1.0, 1e-6);
  EXPECT_EQ(p.cap(64), 32);
  EXPECT_EQ(p.cap(33), 32);  // the same bucket (33..64)
  EXPECT_EQ(p.cap(32), 8);   // another, unmeasured
  EXPECT_EQ(p.cap(1), 8);
  // A step with a prefill chunk is not compared, however long.
  run_step(64, 5.0, /*decode_only=*/false, false);
  run_step(64, 5.0, /*decode_only=*/false, true);
  EXPECT_NEAR(*p.extra_cost(64), 1.0, 1e-6);
  // Batch 1: a verifying step costs 1.2 plain ones.
  for (int i = 0; i < 5; ++i) run_step(1, 0.005, true, false);
  run_step(1, 0.006, true, true);
  EXPECT_NEAR(*p.extra_cost(1), 0.2, 1e-6);
  EXPECT_EQ(p.cap(1), 8);
  EXPECT_EQ(p.cap(64), 32);
}

// The averages follow recent steps: verification that gets cheaper brings
// the cap down again, one that gets dearer raises it.
TEST(SpecCostPolicy, CapFollowsTheRunningAverages) {
  SpecCostPolicy p(0.04);
  p.record(16, 0.010, 0);
  p.record(16, 0.020, 16);
  EXPECT_EQ(p.cap(16), 32);
  for (int i = 0; i < 40; ++i) p.record(16, 0.012, 16);
  EXPECT_NEAR(*p.extra_cost(16), 0.2, 0.01);
  EXPECT_EQ(p.cap(16), 8);
  for (int i = 0; i < 40; ++i) p.record(16, 0.035, 16);
  EXPECT_EQ(p.cap(16), 64);
  // One slow step moves its average by kAverageWeight of the difference:
  // plain 0.010 -> 0.0125 after a 0.030 s step.
  p.record(16, 0.030, 0);
  EXPECT_NEAR(*p.extra_cost(16), 0.035 / 0.0125 - 1.0, 0.02);
}

// Async scheduling: a verification's window is the held step before it and
// the verifying step. Where launch computes steps (the CPU backend) the held
// step() takes ~0 s and the verifying one the verifying and the next plain
// step: a window of 0 + 2 plain-step times costs nothing (r = 0, cap 8),
// although the verifying step() alone reads r = 1. Where the device runs
// steps between launch and collect, 1 + 3 plain times is r = 2 (cap 64).
TEST(SpecCostPolicy, HeldStepJoinsTheVerificationWindow) {
  using Kind = SpecCostPolicy::StepKind;
  FakeClock c;
  SpecCostPolicy p(0.04, [&c] { return c.t; });
  auto run_step = [&](double seconds, bool decode_only, Kind kind) {
    p.step_started();
    c.advance(seconds);
    p.step_finished(64, kind == Kind::kVerifying ? 64 : 0, decode_only, kind);
  };
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 6; ++j) run_step(0.010, true, Kind::kPlain);
    run_step(0.0, true, Kind::kHeld);
    run_step(0.020, true, Kind::kVerifying);
  }
  ASSERT_TRUE(p.extra_cost(64));
  EXPECT_NEAR(*p.extra_cost(64), 0.0, 1e-6);
  EXPECT_EQ(p.cap(64), 8);
  SpecCostPolicy q(0.04, [&c] { return c.t; });
  auto run_q = [&](double seconds, bool decode_only, Kind kind) {
    q.step_started();
    c.advance(seconds);
    q.step_finished(64, kind == Kind::kVerifying ? 64 : 0, decode_only, kind);
  };
  run_q(0.010, true, Kind::kPlain);
  run_q(0.010, true, Kind::kHeld);
  run_q(0.030, true, Kind::kVerifying);
  EXPECT_NEAR(*q.extra_cost(64), 2.0, 1e-6);
  EXPECT_EQ(q.cap(64), 64);
  // A held step followed by a prefill chunk or a plain step joins nothing:
  // the next verifying step's window is its own.
  run_q(0.050, true, Kind::kHeld);
  run_q(0.010, false, Kind::kPlain);
  run_q(0.050, true, Kind::kHeld);
  run_q(0.010, true, Kind::kPlain);
  for (int i = 0; i < 60; ++i) run_q(0.010, true, Kind::kVerifying);
  EXPECT_NEAR(*q.extra_cost(64), 0.0, 0.01);
}

// Every step verifies, a few sequences each (out of phase), never all: no
// plain step, yet the line through the steps with fewer and more verifying
// sequences gives p and r. Simulated: a step of S = 64 sequences, V of which
// verify, takes p (1 + r V / S) with p = 10 ms and r = 1.
TEST(SpecCostPolicy, EstimatesWhenEveryStepVerifies) {
  FakeClock c;
  SpecCostPolicy p(0.04, [&c] { return c.t; });
  const double plain_s = 0.010, r = 1.0;
  for (int i = 0; i < 200; ++i) {
    const size_t num_verifying = 2 + static_cast<size_t>(i * 7 % 11);  // 2..12 of 64
    p.step_started();
    c.advance(plain_s * (1.0 + r * static_cast<double>(num_verifying) / 64.0));
    p.step_finished(64, num_verifying, true, SpecCostPolicy::StepKind::kVerifying);
  }
  ASSERT_TRUE(p.extra_cost(64));
  EXPECT_NEAR(*p.extra_cost(64), r, 1e-3);
  EXPECT_EQ(p.cap(64), 32);
  EXPECT_FALSE(p.extra_cost(16));  // another bucket: unmeasured
  // Verification that costs nothing: r 0, the least cap.
  SpecCostPolicy q(0.04, [&c] { return c.t; });
  for (int i = 0; i < 200; ++i) {
    q.step_started();
    c.advance(plain_s);
    q.step_finished(64, 2 + static_cast<size_t>(i % 9), true, SpecCostPolicy::StepKind::kVerifying);
  }
  EXPECT_NEAR(*q.extra_cost(64), 0.0, 1e-6);
  EXPECT_EQ(q.cap(64), 8);
}

// Too little spread in the verifying share (always 1 of 64, or always the
// same count) gives no estimate rather than a noisy extrapolation.
TEST(SpecCostPolicy, NoEstimateWithoutSpread) {
  SpecCostPolicy p(0.04);
  for (int i = 0; i < 50; ++i) p.record(64, 0.010 + 0.001 * (i % 2), 1 + static_cast<size_t>(i % 2));
  EXPECT_FALSE(p.extra_cost(64));  // shares 1/64 and 2/64: 1/64 apart
  EXPECT_EQ(p.cap(64), 8);
  SpecCostPolicy q(0.04);
  for (int i = 0; i < 50; ++i) q.record(64, 0.012, 8);
  EXPECT_FALSE(q.extra_cost(64));  // one group only
}

// Without plain steps the fit gives r; once plain steps come (the cap grew,
// the samples aligned) the quotient of averages takes over.
TEST(SpecCostPolicy, PlainStepsReplaceTheFit) {
  SpecCostPolicy p(0.04);
  for (int i = 0; i < 100; ++i) {
    const size_t v = 2 + static_cast<size_t>(i % 7);  // 2..8 of 64
    p.record(64, 0.010 * (1.0 + 0.6 * static_cast<double>(v) / 64.0), v);
  }
  ASSERT_TRUE(p.extra_cost(64));
  EXPECT_NEAR(*p.extra_cost(64), 0.6, 1e-3);
  EXPECT_EQ(p.cap(64), 16);
  for (int i = 0; i < 100; ++i) {
    p.record(64, 0.010, 0);
    p.record(64, 0.030, 64, /*num_steps=*/2);  // held + every sequence: r = 1
  }
  EXPECT_NEAR(*p.extra_cost(64), 1.0, 1e-3);
  EXPECT_EQ(p.cap(64), 32);
}

TEST(SpecCostPolicy, ZeroBudgetKeepsTheLeastCap) {
  SpecCostPolicy p(0.0);
  p.record(64, 0.010, 0);
  p.record(64, 0.030, 64);
  EXPECT_NEAR(*p.extra_cost(64), 2.0, 1e-9);
  EXPECT_EQ(p.cap(64), 8);
}

}  // namespace
}  // namespace pagoda
