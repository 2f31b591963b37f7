#include "spec/backoff.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <vector>

namespace pagoda {
namespace {

TEST(SpecBackoff, WaitDoublesUpToTheCapAndResetsOnAcceptance) {
  for (const int32_t cap : {8, 32}) {
    int32_t w = 0;
    std::vector<int32_t> seen;
    for (int i = 0; i < 8; ++i) seen.push_back(w = SpecBackoff::next_wait(w, false, cap));
    const std::vector<int32_t> want = cap == 8 ? std::vector<int32_t>{1, 2, 4, 8, 8, 8, 8, 8}
                                               : std::vector<int32_t>{1, 2, 4, 8, 16, 32, 32, 32};
    EXPECT_EQ(seen, want) << cap;
    EXPECT_EQ(SpecBackoff::next_wait(w, true, cap), 0);
  }
  // A cap that shrinks bounds a longer wait at once.
  EXPECT_EQ(SpecBackoff::next_wait(32, false, 8), 8);
}

TEST(SpecBackoff, NextStepWaitsTheWaitAndAfterRejectionsLandsOnItsMultiples) {
  for (const int32_t cap : {SpecBackoff::kMinCap, 16, SpecBackoff::kMaxCap}) {
    EXPECT_EQ(SpecBackoff::next_step(10, 0, true, cap), 11);
    EXPECT_EQ(SpecBackoff::next_step(10, 1, true, cap), 12);
    EXPECT_EQ(SpecBackoff::next_step(10, 4, true, cap), 12);   // 15 rounded down to 4's multiple
    EXPECT_EQ(SpecBackoff::next_step(10, 4, false, cap), 15);  // no draft: not rounded
    EXPECT_EQ(SpecBackoff::next_step(10, cap, false, cap), 11 + cap);  // no draft: not rounded
    for (int64_t step = 0; step < 200; ++step) {
      const int64_t n = SpecBackoff::next_step(step, cap, true, cap);
      EXPECT_GT(n, step + 1) << step;
      EXPECT_LE(n, step + 1 + cap) << step;
      EXPECT_EQ(n % cap, 0) << step;
    }
  }
}

// Samples whose drafts are all rejected, starting out of phase, end up
// drafting in the same steps: at the cap, one step in `cap` verifies and the
// others are plain decode steps for the whole batch. cap_at(step): the cap
// in force at that step (the engine's changes as it measures).
std::set<int64_t> drafting_steps(const std::function<int32_t(int64_t)>& cap_at, int64_t from,
                                 int64_t to) {
  struct Sample {
    int32_t wait = 0;
    int64_t next = 0;
  };
  std::vector<Sample> samples(64);
  for (size_t i = 0; i < samples.size(); ++i) samples[i].next = static_cast<int64_t>(i % 7);
  std::set<int64_t> steps;
  for (int64_t step = 0; step < to; ++step) {
    bool any = false;
    for (Sample& s : samples) {
      if (s.next > step) continue;
      any = true;
      s.wait = SpecBackoff::next_wait(s.wait, false, cap_at(step));
      s.next = SpecBackoff::next_step(step, s.wait, true, cap_at(step));
    }
    if (any && step >= from) steps.insert(step);
  }
  return steps;
}

TEST(SpecBackoff, MissingSamplesDraftTogether) {
  for (const int32_t cap : {8, 32, 64}) {
    const auto steps = drafting_steps([cap](int64_t) { return cap; }, 1024, 2048);
    EXPECT_EQ(steps.size(), 1024u / static_cast<size_t>(cap)) << cap;
    for (int64_t s : steps) EXPECT_EQ(s % cap, 0) << cap;
  }
}

// The cap changes while samples miss (8, then 32, then 16, then 64): after
// each change settles, every sample verifies in the same steps, the
// multiples of the new cap.
TEST(SpecBackoff, MissingSamplesStayAlignedWhenTheCapChanges) {
  auto cap_at = [](int64_t step) -> int32_t {
    if (step < 500) return 8;
    if (step < 1000) return 32;
    if (step < 1500) return 16;
    return 64;
  };
  struct Phase {
    int64_t from, to;
    int32_t cap;
  };
  // Each phase measured after a settling time of two old caps and two new ones.
  for (const Phase& p :
       {Phase{100, 500, 8}, Phase{700, 1000, 32}, Phase{1100, 1500, 16}, Phase{1700, 2500, 64}}) {
    const auto steps = drafting_steps(cap_at, p.from, p.to);
    ASSERT_FALSE(steps.empty()) << p.cap;
    for (int64_t s : steps) EXPECT_EQ(s % p.cap, 0) << p.cap << " at " << s;
    // One step in `cap`, give or take the phase's ends.
    const auto want = static_cast<size_t>((p.to - p.from) / p.cap);
    EXPECT_GE(steps.size() + 1, want) << p.cap;
    EXPECT_LE(steps.size(), want + 1) << p.cap;
  }
}

}  // namespace
}  // namespace pagoda
