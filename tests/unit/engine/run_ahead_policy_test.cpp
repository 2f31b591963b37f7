// RunAheadPolicy with a fake clock: small steps wait only within the window
// after a busy arrival; large steps and steps without one always run ahead.
#include "engine/run_ahead_policy.h"

#include <gtest/gtest.h>

#include <chrono>

namespace pagoda {
namespace {

using Clock = RunAheadPolicy::Clock;

struct FakeClock {
  Clock::time_point t{};
  void advance(double s) {
    t += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
};

TEST(RunAheadPolicy, SmallStepsWaitOnlyWithinTheWindowAfterABusyArrival) {
  FakeClock c;
  RunAheadPolicy p({.small_batch = 8, .arrival_window_s = 2.0}, [&c] { return c.t; });
  EXPECT_TRUE(p.run_ahead(1));  // no arrival yet: a lone decode runs ahead
  c.advance(10.0);
  p.on_busy_arrival();
  EXPECT_FALSE(p.run_ahead(1));
  EXPECT_FALSE(p.run_ahead(7));
  EXPECT_TRUE(p.run_ahead(8));  // at the threshold: ahead
  EXPECT_TRUE(p.run_ahead(200));
  c.advance(1.9);
  EXPECT_FALSE(p.run_ahead(7));
  c.advance(0.2);  // 2.1 s after the arrival
  EXPECT_TRUE(p.run_ahead(7));
  p.on_busy_arrival();  // a new arrival reopens the window
  EXPECT_FALSE(p.run_ahead(1));
}

TEST(RunAheadPolicy, ZeroThresholdTurnsTheRuleOff) {
  FakeClock c;
  RunAheadPolicy p({.small_batch = 0, .arrival_window_s = 2.0}, [&c] { return c.t; });
  p.on_busy_arrival();
  EXPECT_TRUE(p.run_ahead(1));
}

TEST(RunAheadPolicy, Defaults) {
  FakeClock c;
  RunAheadPolicy p({}, [&c] { return c.t; });  // small_batch 16, 5 s
  p.on_busy_arrival();
  EXPECT_FALSE(p.run_ahead(15));
  EXPECT_TRUE(p.run_ahead(16));
  c.advance(4.9);
  EXPECT_FALSE(p.run_ahead(1));
  c.advance(0.2);
  EXPECT_TRUE(p.run_ahead(1));
}

TEST(RunAheadPolicy, TheSteadyClockByDefault) {
  RunAheadPolicy p;
  EXPECT_TRUE(p.run_ahead(1));
  p.on_busy_arrival();
  EXPECT_FALSE(p.run_ahead(1));  // well within 5 s of now
}

}  // namespace
}  // namespace pagoda
