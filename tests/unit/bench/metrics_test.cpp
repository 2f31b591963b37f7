// Metric arithmetic against values worked out by hand and with numpy
// (numpy.percentile / mean / std of the same samples).
#include "bench/metrics.h"

#include <gtest/gtest.h>

namespace pagoda::bench {
namespace {

TEST(Percentile, MatchesNumpyLinearInterpolation) {
  // numpy.percentile([0.3, 0.1, 0.7, 0.2, 1.5, 0.9, 0.05], p)
  std::vector<double> v = {0.3, 0.1, 0.7, 0.2, 1.5, 0.9, 0.05};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 0.05);
  EXPECT_NEAR(percentile(v, 10), 0.08, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 0.3);
  EXPECT_NEAR(percentile(v, 90), 1.14, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 1.464, 1e-12);
  EXPECT_NEAR(percentile(v, 99.9), 1.4964, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 1.5);
  EXPECT_EQ(percentile({}, 50), 0.0);
  EXPECT_EQ(percentile({2.5}, 99), 2.5);
}

TEST(LatencyStats, MeanMedianPopulationStdInMs) {
  std::vector<double> v = {0.3, 0.1, 0.7, 0.2, 1.5, 0.9, 0.05};
  auto s = latency_stats(v, {99});
  EXPECT_NEAR(s.mean_ms, 535.7142857142857, 1e-9);
  EXPECT_NEAR(s.std_ms, 490.41839696491063, 1e-9);  // numpy.std (ddof=0)
  EXPECT_NEAR(s.median_ms, 300.0, 1e-9);
  ASSERT_EQ(s.percentiles_ms.size(), 1u);
  EXPECT_EQ(s.percentiles_ms[0].first, 99.0);
  EXPECT_NEAR(s.percentiles_ms[0].second, 1464.0, 1e-9);
  auto empty = latency_stats({}, {50, 99});
  EXPECT_EQ(empty.mean_ms, 0.0);
  EXPECT_EQ(empty.percentiles_ms[1].second, 0.0);
}

RequestRecord ok(double start, double ttft, std::vector<double> itl, int64_t usage_tokens,
                 int64_t prompt_len) {
  RequestRecord r;
  r.success = true;
  r.start_time = start;
  r.ttft = ttft;
  r.itl = itl;
  r.num_chunks = static_cast<int64_t>(itl.size()) + 1;
  r.latency = ttft;
  for (double g : itl) r.latency += g;
  r.output_tokens = usage_tokens;
  r.prompt_len = prompt_len;
  return r;
}

TEST(ServeMetrics, DefinitionsOfVllmBenchServe) {
  // A: 5 tokens (usage) in 3 chunks; B: no usage, 4 chunks; C: one token;
  // D: failed.
  std::vector<RequestRecord> rs = {ok(0.0, 0.100, {0.02, 0.03}, 5, 10),
                                   ok(0.5, 0.200, {0.01, 0.01, 0.04}, 0, 20),
                                   ok(1.0, 0.050, {}, 1, 7), RequestRecord{}};
  rs[3].prompt_len = 99;
  rs[3].error = "HTTP 500";
  SloConfig slo;
  slo.ttft_ms = 150;
  slo.tpot_ms = 20;
  auto m = compute_serve_metrics(rs, 2.0, slo, {50, 99});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 37);   // failed prompts are not counted
  EXPECT_EQ(m.total_output, 10);  // 5 (usage) + 4 (chunks) + 1
  EXPECT_EQ(m.output_lens, (std::vector<int64_t>{5, 4, 1, 0}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 5.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 23.5);
  // TPOT: A (0.15 - 0.10) / 4 = 12.5 ms, B (0.26 - 0.20) / 3 = 20 ms; C has one token.
  EXPECT_NEAR(m.tpot.mean_ms, 16.25, 1e-9);
  EXPECT_NEAR(m.tpot.median_ms, 16.25, 1e-9);
  EXPECT_NEAR(m.tpot.percentiles_ms[1].second, 12.5 + 0.99 * 7.5, 1e-9);
  EXPECT_NEAR(m.ttft.mean_ms, (100.0 + 200.0 + 50.0) / 3.0, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 100.0, 1e-9);
  // ITL pools every gap: {20, 30, 10, 10, 40} ms.
  EXPECT_NEAR(m.itl.mean_ms, 22.0, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 20.0, 1e-9);
  EXPECT_NEAR(m.e2el.mean_ms, (150.0 + 260.0 + 50.0) / 3.0, 1e-9);
  // Goodput: A meets both, B fails TTFT, C meets (TPOT counts as 0).
  EXPECT_EQ(m.num_good, 2);
  ASSERT_TRUE(m.request_goodput.has_value());
  EXPECT_DOUBLE_EQ(*m.request_goodput, 1.0);
  // A [0, 0.15), B [0.5, 0.76), C [1.0, 1.05): never two at once.
  EXPECT_EQ(m.max_concurrent_requests, 1);
  // Chunk times from t=0: A 0.10 0.12 0.15, B 0.70 0.71 0.72 0.76, C 1.05.
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 7.0);
}

TEST(ServeMetrics, TpotSloBoundaryIsInclusiveAndNoSloMeansNoGoodput) {
  std::vector<RequestRecord> rs = {ok(0.0, 0.25, {0.125}, 2, 1)};  // TPOT exactly 125 ms
  SloConfig slo;
  slo.tpot_ms = 125;
  EXPECT_EQ(compute_serve_metrics(rs, 1.0, slo, {}).num_good, 1);
  slo.tpot_ms = 124.999;
  EXPECT_EQ(compute_serve_metrics(rs, 1.0, slo, {}).num_good, 0);
  EXPECT_FALSE(compute_serve_metrics(rs, 1.0, SloConfig{}, {}).request_goodput.has_value());
}

TEST(ServeMetrics, PeakConcurrencyCountsOverlapsHalfOpen) {
  // [0, 1), [0.5, 1.5), [1.0, 2.0): the third starts as the first ends.
  std::vector<RequestRecord> rs = {ok(0.0, 1.0, {}, 1, 1), ok(0.5, 1.0, {}, 1, 1),
                                   ok(1.0, 1.0, {}, 1, 1)};
  EXPECT_EQ(compute_serve_metrics(rs, 2.0, {}, {}).max_concurrent_requests, 2);
}

TEST(ServeMetrics, AllFailedGivesZeros) {
  std::vector<RequestRecord> rs(3);
  auto m = compute_serve_metrics(rs, 1.0, {}, {99});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 3);
  EXPECT_EQ(m.ttft.mean_ms, 0.0);
  EXPECT_EQ(m.max_concurrent_requests, 0);
}

}  // namespace
}  // namespace pagoda::bench
