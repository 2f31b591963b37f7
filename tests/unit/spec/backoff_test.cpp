#include "spec/backoff.h"

#include <gtest/gtest.h>

#include <set>

namespace pagoda {
namespace {

TEST(SpecBackoff, WaitDoublesUpToTheCapAndResetsOnAcceptance) {
  int32_t w = 0;
  std::vector<int32_t> seen;
  for (int i = 0; i < 7; ++i) seen.push_back(w = SpecBackoff::next_wait(w, false));
  EXPECT_EQ(seen, (std::vector<int32_t>{1, 2, 4, 8, 8, 8, 8}));
  EXPECT_EQ(SpecBackoff::next_wait(w, true), 0);
}

TEST(SpecBackoff, NextStepWaitsTheWaitAndAtTheCapLandsOnItsMultiples) {
  EXPECT_EQ(SpecBackoff::next_step(10, 0, true), 11);
  EXPECT_EQ(SpecBackoff::next_step(10, 1, true), 12);
  EXPECT_EQ(SpecBackoff::next_step(10, 4, true), 15);
  const int32_t cap = SpecBackoff::kMaxBackoff;
  EXPECT_EQ(SpecBackoff::next_step(10, cap, false), 11 + cap);  // no draft: not rounded
  for (int64_t step = 0; step < 100; ++step) {
    const int64_t n = SpecBackoff::next_step(step, cap, true);
    EXPECT_GT(n, step + 1) << step;
    EXPECT_LE(n, step + 1 + cap) << step;
    EXPECT_EQ(n % cap, 0) << step;
  }
}

// Samples whose drafts are all rejected, starting out of phase, end up drafting in
// the same steps: at the cap, one step in kMaxBackoff verifies and the others are
// plain decode steps for the whole batch.
TEST(SpecBackoff, MissingSamplesDraftTogether) {
  struct Sample {
    int32_t wait = 0;
    int64_t next = 0;
  };
  std::vector<Sample> samples(64);
  for (size_t i = 0; i < samples.size(); ++i) samples[i].next = static_cast<int64_t>(i % 7);
  std::set<int64_t> drafting_steps;
  for (int64_t step = 0; step < 2000; ++step) {
    bool any = false;
    for (Sample& s : samples) {
      if (s.next > step) continue;
      any = true;
      s.wait = SpecBackoff::next_wait(s.wait, false);
      s.next = SpecBackoff::next_step(step, s.wait, true);
    }
    if (any && step >= 1000) drafting_steps.insert(step);
  }
  EXPECT_EQ(drafting_steps.size(), 1000u / SpecBackoff::kMaxBackoff);
}

}  // namespace
}  // namespace pagoda
