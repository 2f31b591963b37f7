// Arrival schedule statistics: gamma gaps with shape = burstiness have mean
// 1/rate and coefficient of variation 1/sqrt(burstiness); the schedule is
// rescaled to end at N/rate exactly.
#include "bench/arrivals.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pagoda::bench {
namespace {

struct GapStats {
  double mean = 0, cv = 0;
};

GapStats gap_stats(const std::vector<double>& t) {
  std::vector<double> gaps = {t[0]};
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  double mean = 0, var = 0;
  for (double g : gaps) mean += g;
  mean /= static_cast<double>(gaps.size());
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= static_cast<double>(gaps.size());
  return {mean, std::sqrt(var) / mean};
}

TEST(Arrivals, PoissonAndGammaShapes) {
  constexpr int64_t kN = 200000;
  for (double burstiness : {1.0, 0.25, 4.0}) {
    auto t = arrival_offsets(kN, 50.0, burstiness, 7);
    ASSERT_TRUE(t.ok());
    ASSERT_EQ(t->size(), static_cast<size_t>(kN));
    EXPECT_NEAR(t->back(), kN / 50.0, 1e-6) << "schedule must end at N / rate";
    for (size_t i = 1; i < t->size(); ++i) ASSERT_LE((*t)[i - 1], (*t)[i]);
    auto s = gap_stats(*t);
    EXPECT_NEAR(s.mean, 1.0 / 50.0, 1e-9);  // exact after rescaling
    EXPECT_NEAR(s.cv, 1.0 / std::sqrt(burstiness), 0.02 / std::sqrt(burstiness))
        << "burstiness " << burstiness;
  }
}

TEST(Arrivals, SeededAndDeterministic) {
  auto a = arrival_offsets(100, 4.0, 1.0, 1), b = arrival_offsets(100, 4.0, 1.0, 1),
       c = arrival_offsets(100, 4.0, 1.0, 2);
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

TEST(Arrivals, InfiniteRateAndBurstiness) {
  double inf = std::numeric_limits<double>::infinity();
  auto all_at_once = arrival_offsets(5, inf, 1.0, 0);
  EXPECT_EQ(*all_at_once, std::vector<double>(5, 0.0));
  auto even = arrival_offsets(4, 2.0, inf, 0);
  ASSERT_TRUE(even.ok());
  EXPECT_NEAR((*even)[0], 0.5, 1e-12);
  EXPECT_NEAR((*even)[3], 2.0, 1e-12);
}

TEST(Arrivals, RejectsBadArguments) {
  EXPECT_FALSE(arrival_offsets(10, 0.0, 1.0, 0).ok());
  EXPECT_FALSE(arrival_offsets(10, -1.0, 1.0, 0).ok());
  EXPECT_FALSE(arrival_offsets(10, 1.0, 0.0, 0).ok());
  EXPECT_FALSE(arrival_offsets(-1, 1.0, 1.0, 0).ok());
  EXPECT_TRUE(arrival_offsets(0, 1.0, 1.0, 0)->empty());
}

}  // namespace
}  // namespace pagoda::bench
