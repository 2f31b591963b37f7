// engine/histogram.h: cumulative bucket counts at and between bounds, the
// +Inf overflow, and vLLM's bucket layouts.
#include "engine/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pagoda {
namespace {

TEST(Histogram, ObserveCountsEveryBucketAtOrAboveTheValue) {
  Histogram h = make_histogram({0.1, 1.0, 10.0});
  observe(h, 0.05);   // <= every bound
  observe(h, 1.0);    // exactly a bound: counted in that bucket
  observe(h, 1.5);    // between bounds
  observe(h, 100.0);  // above every bound: only in count (+Inf)
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(h.count, 4u);
  EXPECT_DOUBLE_EQ(h.sum, 0.05 + 1.0 + 1.5 + 100.0);
}

TEST(Histogram, CountsStayMonotoneAndBelowTheTotal) {
  Histogram h = make_histogram(request_latency_buckets());
  for (int i = 0; i < 1000; ++i) observe(h, 0.013 * i * i);
  ASSERT_EQ(h.counts.size(), h.bounds.size());
  EXPECT_TRUE(std::is_sorted(h.counts.begin(), h.counts.end()));
  EXPECT_LE(h.counts.back(), h.count);
  EXPECT_EQ(h.count, 1000u);
}

TEST(Histogram, EmptyHistogramHasZeroCounts) {
  Histogram h = make_histogram(ttft_buckets());
  EXPECT_EQ(h.counts.size(), h.bounds.size());
  EXPECT_TRUE(std::all_of(h.counts.begin(), h.counts.end(), [](uint64_t c) { return c == 0; }));
  EXPECT_EQ(h.count, 0u);
}

TEST(HistogramBuckets, OneTwoFiveUpToTheMaximum) {
  EXPECT_EQ(buckets_1_2_5(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(buckets_1_2_5(2048),
            (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}));
  EXPECT_EQ(buckets_1_2_5(4), (std::vector<double>{1, 2}));
  EXPECT_EQ(buckets_1_2_5(1), (std::vector<double>{1}));
  EXPECT_TRUE(buckets_1_2_5(0).empty());
  // No overflow near the top of int64.
  const std::vector<double> big = buckets_1_2_5(INT64_MAX);
  EXPECT_EQ(big.back(), 5e18);
  EXPECT_TRUE(std::is_sorted(big.begin(), big.end()));
}

TEST(HistogramBuckets, VllmLayouts) {
  // vLLM's V1 PrometheusStatLogger: ends and lengths of each layout.
  const auto ttft = ttft_buckets();
  EXPECT_EQ(ttft.size(), 22u);
  EXPECT_EQ(ttft.front(), 0.001);
  EXPECT_EQ(ttft.back(), 2560.0);
  const auto itl = inter_token_buckets();
  EXPECT_EQ(itl.size(), 19u);
  EXPECT_EQ(itl.front(), 0.01);
  EXPECT_EQ(itl.back(), 80.0);
  const auto lat = request_latency_buckets();
  EXPECT_EQ(lat.size(), 21u);
  EXPECT_EQ(lat.front(), 0.3);
  EXPECT_EQ(lat.back(), 7680.0);
  EXPECT_EQ(iteration_tokens_buckets(),
            (std::vector<double>{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}));
  EXPECT_EQ(params_n_buckets(), (std::vector<double>{1, 2, 5, 10, 20}));
  for (const auto& b : {ttft, itl, lat}) EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
}

TEST(HistogramBuckets, EngineMetricsHistogramsAreLaidOut) {
  const EngineMetrics m = make_engine_metrics(512);
  EXPECT_EQ(m.time_to_first_token.bounds, ttft_buckets());
  EXPECT_EQ(m.inter_token_latency.bounds, inter_token_buckets());
  EXPECT_EQ(m.request_time_per_output_token.bounds, inter_token_buckets());
  for (const Histogram* h :
       {&m.e2e_latency, &m.queue_time, &m.prefill_time, &m.decode_time, &m.inference_time}) {
    EXPECT_EQ(h->bounds, request_latency_buckets());
  }
  for (const Histogram* h :
       {&m.request_prompt_tokens, &m.request_generation_tokens, &m.request_max_generation_tokens,
        &m.request_prefill_computed_tokens, &m.request_params_max_tokens}) {
    EXPECT_EQ(h->bounds, (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500}));
    EXPECT_EQ(h->counts.size(), h->bounds.size());
  }
  EXPECT_EQ(m.request_params_n.bounds, params_n_buckets());
  EXPECT_EQ(m.iteration_tokens.bounds, iteration_tokens_buckets());
}

}  // namespace
}  // namespace pagoda
