// Prometheus exposition of EngineMetrics: syntax of every line, names,
// labels, and cumulative histogram buckets.
#include "openai/metrics_text.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

namespace pagoda::openai {
namespace {

// Parses "name{labels} value" lines into a map keyed by "name{labels}";
// checks every line against the text format's grammar.
std::map<std::string, double> parse_exposition(const std::string& text) {
  static const std::regex kSample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$)");
  static const std::regex kComment(R"(^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$)");
  std::map<std::string, double> samples;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kComment)) continue;
    EXPECT_TRUE(std::regex_match(line, m, kSample)) << "bad line: " << line;
    if (m.empty()) continue;
    const std::string value = m[3];
    samples[std::string(m[1]) + std::string(m[2])] = value == "+Inf" ? INFINITY : std::stod(value);
  }
  EXPECT_EQ(text.back(), '\n');
  return samples;
}

TEST(MetricsText, ExposesEngineMetrics) {
  EngineMetrics m;
  m.num_running = 3;
  m.num_waiting = 7;
  m.finished_stop = 10;
  m.finished_length = 4;
  m.finished_abort = 1;
  m.prompt_tokens = 1234;
  m.generation_tokens = 567;
  m.num_preemptions = 2;
  m.kv_usage = 0.25;
  m.prefix_cache_queries = 1000;
  m.prefix_cache_hits = 250;
  m.time_to_first_token = Histogram{{0.01, 0.1, 1.0}, {1, 3, 4}, 0.9, 5};
  const std::string text = format_prometheus(m, "my \"model\"");
  auto s = parse_exposition(text);
  const std::string l = R"({model_name="my \"model\""})";
  EXPECT_EQ(s["pagoda:num_requests_running" + l], 3);
  EXPECT_EQ(s["pagoda:num_requests_waiting" + l], 7);
  EXPECT_EQ(s["pagoda:kv_cache_usage_perc" + l], 0.25);
  EXPECT_EQ(s["pagoda:prefix_cache_queries_total" + l], 1000);
  EXPECT_EQ(s["pagoda:prefix_cache_hits_total" + l], 250);
  EXPECT_EQ(s["pagoda:num_preemptions_total" + l], 2);
  EXPECT_EQ(s["pagoda:prompt_tokens_total" + l], 1234);
  EXPECT_EQ(s["pagoda:generation_tokens_total" + l], 567);
  const std::string base =
      R"(pagoda:request_success_total{model_name="my \"model\"",finished_reason=)";
  EXPECT_EQ(s[base + "\"stop\"}"], 10);
  EXPECT_EQ(s[base + "\"length\"}"], 4);
  EXPECT_EQ(s[base + "\"abort\"}"], 1);
  const std::string ttft =
      R"(pagoda:time_to_first_token_seconds_bucket{model_name="my \"model\"",le=)";
  EXPECT_EQ(s[ttft + "\"0.01\"}"], 1);
  EXPECT_EQ(s[ttft + "\"0.1\"}"], 3);
  EXPECT_EQ(s[ttft + "\"1\"}"], 4);
  EXPECT_EQ(s[ttft + "\"+Inf\"}"], 5);
  EXPECT_EQ(s["pagoda:time_to_first_token_seconds_sum" + l], 0.9);
  EXPECT_EQ(s["pagoda:time_to_first_token_seconds_count" + l], 5);
  for (const char* h : {"time_per_output_token_seconds", "e2e_request_latency_seconds",
                        "request_queue_time_seconds"}) {
    EXPECT_EQ(s[std::string("pagoda:") + h + "_count" + l], 0) << h;
  }
  EXPECT_NE(text.find("# TYPE pagoda:time_to_first_token_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE pagoda:prompt_tokens_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE pagoda:num_requests_running gauge\n"), std::string::npos);
}

TEST(MetricsText, ExposesStepTimes) {
  EngineMetrics m;
  m.steps.add(2.5, 1.5);
  m.detokenize_seconds = 0.25;
  auto s = parse_exposition(format_prometheus(m, "m"));
  const std::string l = R"({model_name="m"})";
  EXPECT_EQ(s["pagoda:engine_steps_total" + l], 1);
  EXPECT_EQ(s["pagoda:engine_step_seconds_total" + l], 2.5);
  EXPECT_EQ(s["pagoda:engine_step_device_wait_seconds_total" + l], 1.5);
  EXPECT_EQ(s["pagoda:engine_detokenize_seconds_total" + l], 0.25);
}

}  // namespace
}  // namespace pagoda::openai
