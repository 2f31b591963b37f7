#include "bench/report.h"

#include <gtest/gtest.h>

#include <limits>

namespace pagoda::bench {
namespace {

TEST(Report, PercentileWords) {
  EXPECT_EQ(percentile_word(99.0), "99");
  EXPECT_EQ(percentile_word(99.9), "99.9");
  EXPECT_EQ(percentile_word(50), "50");
}

TEST(Report, SummaryAndJsonCarryTheMetrics) {
  RequestRecord a;
  a.success = true;
  a.prompt_len = 8;
  a.output_tokens = 3;
  a.num_chunks = 3;
  a.arrival_time = 0.5;
  a.start_time = 0.75;
  a.ttft = 0.1;
  a.itl = {0.02, 0.03};
  a.latency = 0.15;
  RequestRecord b;
  b.prompt_len = 5;
  b.error = "HTTP 503: busy";
  std::vector<RequestRecord> rs = {a, b};
  SloConfig slo;
  slo.e2el_ms = 100;
  auto m = compute_serve_metrics(rs, 2.0, slo, {90, 99.5});
  RunConfig c;
  c.model = "m";
  c.request_rate = std::numeric_limits<double>::infinity();
  c.max_concurrency = 4;
  c.slo = slo;
  c.percentiles = {90, 99.5};
  std::string s = format_summary(c, m);
  EXPECT_NE(s.find(" Serving Benchmark Result "), std::string::npos);
  EXPECT_NE(s.find("Successful requests:                     1"), std::string::npos);
  EXPECT_NE(s.find("Failed requests:                         1"), std::string::npos);
  EXPECT_NE(s.find("Maximum request concurrency:             4"), std::string::npos);
  EXPECT_EQ(s.find("Request rate configured"), std::string::npos);  // inf is not printed
  EXPECT_NE(s.find("Request goodput (req/s):                 0.00"), std::string::npos);
  EXPECT_NE(s.find("P99.5 TPOT (ms):                         25.00"), std::string::npos);
  EXPECT_NE(s.find("Mean E2EL (ms):                          150.00"), std::string::npos);

  auto j = result_json(c, m, rs);
  EXPECT_EQ(j["completed"], 1);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["max_concurrency"], 4);
  EXPECT_DOUBLE_EQ(j["request_goodput"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["request_throughput"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["p99.5_tpot_ms"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(j["mean_itl_ms"].get<double>(), 25.0);
  EXPECT_EQ(j["input_lens"], nlohmann::json::array({8, 5}));
  EXPECT_EQ(j["output_lens"], nlohmann::json::array({3, 0}));
  EXPECT_DOUBLE_EQ(j["queue_times"][0].get<double>(), 0.25);
  EXPECT_EQ(j["errors"][1], "HTTP 503: busy");
  EXPECT_EQ(j["goodput_slo_ms"]["e2el"], 100.0);
  SloConfig none;
  EXPECT_TRUE(
      result_json(c, compute_serve_metrics(rs, 2.0, none, {}), rs)["request_goodput"].is_null());
}

}  // namespace
}  // namespace pagoda::bench
