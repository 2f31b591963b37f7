// Prometheus exposition of EngineMetrics: syntax of every line, names,
// labels, and cumulative histogram buckets; vLLM's families beside pagoda's.
#include "openai/metrics_text.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "engine/histogram.h"
#include "openai/prometheus_writer.h"

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
  ModelInfo info;
  info.tensor_parallel_size = 2;
  info.pipeline_parallel_size = 3;
  info.kv_capacity_tokens = 4096;
  info.kv_cache_dtype = "fp8_e4m3";
  info.block_size = 16;
  const std::string text = format_prometheus(m, "my \"model\"", info);
  auto s = parse_exposition(text);
  const std::string l = R"({model_name="my \"model\""})";
  EXPECT_EQ(s["pagoda:num_requests_running" + l], 3);
  EXPECT_EQ(s["pagoda:num_requests_waiting" + l], 7);
  EXPECT_EQ(s["pagoda:kv_cache_usage_perc" + l], 0.25);
  EXPECT_EQ(s["pagoda:tensor_parallel_size" + l], 2);
  EXPECT_EQ(s["pagoda:pipeline_parallel_size" + l], 3);
  EXPECT_EQ(s["pagoda:kv_cache_capacity_tokens" + l], 4096);
  EXPECT_EQ(
      s[R"(pagoda:kv_cache_info{model_name="my \"model\"",cache_dtype="fp8_e4m3",block_size="16"})"],
      1);
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
  EXPECT_EQ(s[ttft + "\"1.0\"}"], 4);
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
  m.overlapped_steps = 7;
  m.held_steps = 3;
  auto s = parse_exposition(format_prometheus(m, "m", ModelInfo{}));
  const std::string l = R"({model_name="m"})";
  EXPECT_EQ(s["pagoda:engine_steps_total" + l], 1);
  EXPECT_EQ(s["pagoda:engine_step_seconds_total" + l], 2.5);
  EXPECT_EQ(s["pagoda:engine_step_device_wait_seconds_total" + l], 1.5);
  EXPECT_EQ(s["pagoda:engine_detokenize_seconds_total" + l], 0.25);
  EXPECT_EQ(s["pagoda:engine_steps_overlapped_total" + l], 7);
  EXPECT_EQ(s["pagoda:engine_steps_held_total" + l], 3);
}

// Speculation's families appear only with speculation on (per-position
// counts sized by k), the back-off cap among them as a gauge.
TEST(MetricsText, ExposesSpeculationWithItsBackoffCap) {
  EngineMetrics m;
  EXPECT_EQ(format_prometheus(m, "m", ModelInfo{}).find("spec_backoff_cap"), std::string::npos);
  m.spec_accepted_per_position = {5, 2};
  m.spec_num_drafts = 9;
  m.spec_backoff_cap = 32;
  const std::string text = format_prometheus(m, "m", ModelInfo{});
  auto s = parse_exposition(text);
  const std::string l = R"({model_name="m"})";
  EXPECT_EQ(s["pagoda:spec_decode_num_drafts_total" + l], 9);
  EXPECT_EQ(s["pagoda:spec_backoff_cap" + l], 32);
  EXPECT_NE(text.find("# TYPE pagoda:spec_backoff_cap gauge\n"), std::string::npos);
}

TEST(MetricsText, WeightPrecisionInfo) {
  EngineMetrics m;
  const std::string precision = "fp8 (w8a8, dynamic per-token; per-channel weight scales; x)";
  ModelInfo info;
  info.weight_precision = precision;
  auto s = parse_exposition(format_prometheus(m, "m", info));
  EXPECT_EQ(s[R"(pagoda:weight_precision_info{model_name="m",precision=")" + precision + "\"}"], 1);
  const std::string plain = format_prometheus(m, "m", ModelInfo{});
  EXPECT_EQ(plain.find("weight_precision"), std::string::npos);
}

TEST(MetricsText, NumbersAsPrometheusPythonClientWritesThem) {
  EXPECT_EQ(prometheus_number(1.0), "1.0");
  EXPECT_EQ(prometheus_number(0.0), "0.0");
  EXPECT_EQ(prometheus_number(3), "3.0");
  EXPECT_EQ(prometheus_number(0.25), "0.25");
  EXPECT_EQ(prometheus_number(0.001), "0.001");
  EXPECT_EQ(prometheus_number(1e-05), "1e-05");
  EXPECT_EQ(prometheus_number(16384), "16384.0");
  EXPECT_EQ(prometheus_number(2560.0), "2560.0");
  EXPECT_EQ(prometheus_number(999999), "999999.0");
  EXPECT_EQ(prometheus_number(1e6), "1e+06");
  EXPECT_EQ(prometheus_number(2e6), "2e+06");
  EXPECT_EQ(prometheus_number(1234567), "1.234567e+06");
  EXPECT_EQ(prometheus_number(5e10), "5e+010");  // Python's quirk, kept
  EXPECT_EQ(prometheus_number(INFINITY), "+Inf");
  EXPECT_EQ(prometheus_number(-INFINITY), "-Inf");
  EXPECT_EQ(prometheus_number(NAN), "NaN");
}

// Splits the exposition into families: TYPE line name -> (type, sample names).
struct Family {
  std::string type;
  std::vector<std::string> samples;  // "name{labels} value" lines
};
std::map<std::string, Family> families(const std::string& text) {
  std::map<std::string, Family> out;
  std::istringstream in(text);
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string type;
      words >> current >> type;
      EXPECT_FALSE(out.contains(current)) << "family twice: " << current;
      out[current].type = type;
    } else if (!line.empty() && line[0] != '#') {
      EXPECT_FALSE(current.empty()) << line;
      out[current].samples.push_back(line);
    }
  }
  return out;
}

TEST(MetricsText, VllmFamiliesBesidePagodas) {
  EngineMetrics m = make_engine_metrics(2048);
  m.num_running = 2;
  m.num_waiting = 1;
  m.kv_usage = 0.5;
  m.prompt_tokens = 30;
  m.generation_tokens = 12;
  m.finished_stop = 3;
  m.finished_length = 1;
  m.prefix_cache_queries = 64;
  m.prefix_cache_hits = 16;
  observe(m.time_to_first_token, 0.03);
  observe(m.inter_token_latency, 0.02);
  observe(m.request_prompt_tokens, 7);
  observe(m.iteration_tokens, 40);
  const std::string text = format_prometheus(m, "tiny", ModelInfo{});
  auto s = parse_exposition(text);
  const std::string l = R"({model_name="tiny",engine="0"})";
  EXPECT_EQ(s["vllm:num_requests_running" + l], 2);
  EXPECT_EQ(s["vllm:num_requests_waiting" + l], 1);
  EXPECT_EQ(s["vllm:kv_cache_usage_perc" + l], 0.5);
  EXPECT_EQ(s["vllm:gpu_cache_usage_perc" + l], 0.5);
  EXPECT_EQ(s["vllm:prompt_tokens_total" + l], 30);
  EXPECT_EQ(s["vllm:generation_tokens_total" + l], 12);
  EXPECT_EQ(s["vllm:prefix_cache_queries_total" + l], 64);
  EXPECT_EQ(s["vllm:prefix_cache_hits_total" + l], 16);
  EXPECT_EQ(s["vllm:num_preemptions_total" + l], 0);
  EXPECT_EQ(s[R"(vllm:request_success_total{model_name="tiny",engine="0",finished_reason="stop"})"], 3);
  EXPECT_EQ(s[R"(vllm:request_success_total{model_name="tiny",engine="0",finished_reason="length"})"], 1);
  EXPECT_EQ(s[R"(vllm:request_success_total{model_name="tiny",engine="0",finished_reason="abort"})"], 0);
  // Buckets with vLLM's bounds, `le` as vLLM's server writes it.
  const std::string ttft = R"(vllm:time_to_first_token_seconds_bucket{model_name="tiny",engine="0",le=)";
  EXPECT_EQ(s[ttft + "\"0.02\"}"], 0);
  EXPECT_EQ(s[ttft + "\"0.04\"}"], 1);
  EXPECT_EQ(s[ttft + "\"2560.0\"}"], 1);
  EXPECT_EQ(s[ttft + "\"+Inf\"}"], 1);
  const std::string prompt = R"(vllm:request_prompt_tokens_bucket{model_name="tiny",engine="0",le=)";
  EXPECT_EQ(s[prompt + "\"5.0\"}"], 0);
  EXPECT_EQ(s[prompt + "\"10.0\"}"], 1);
  EXPECT_EQ(s[prompt + "\"2000.0\"}"], 1);
  EXPECT_FALSE(s.contains(prompt + "\"5000.0\"}"));  // past max_model_len
  EXPECT_EQ(s[R"(vllm:iteration_tokens_total_bucket{model_name="tiny",engine="0",le="64.0"})"], 1);
  // The deprecated name carries the inter-token latency too.
  EXPECT_EQ(s["vllm:inter_token_latency_seconds_count" + l], 1);
  EXPECT_EQ(s["vllm:time_per_output_token_seconds_count" + l], 1);
  EXPECT_EQ(s["vllm:inter_token_latency_seconds_sum" + l], 0.02);

  const auto f = families(text);
  for (const char* name :
       {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc"}) {
    EXPECT_EQ(f.at(name).type, "gauge") << name;
  }
  for (const char* name :
       {"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
        "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"}) {
    EXPECT_EQ(f.at(name).type, "counter") << name;
  }
  for (const char* name :
       {"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds", "vllm:request_time_per_output_token_seconds",
        "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
        "vllm:request_inference_time_seconds", "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
        "vllm:request_max_num_generation_tokens", "vllm:request_params_n", "vllm:request_params_max_tokens",
        "vllm:request_prefill_kv_computed_tokens", "vllm:iteration_tokens_total"}) {
    EXPECT_EQ(f.at(name).type, "histogram") << name;
  }
}

TEST(MetricsText, EveryFamilyHasSamplesAndCountersEndInTotal) {
  const auto f = families(format_prometheus(make_engine_metrics(128), "m", ModelInfo{}));
  EXPECT_GE(f.size(), 40u);
  for (const auto& [name, family] : f) {
    EXPECT_FALSE(family.samples.empty()) << name;
    if (family.type == "counter") {
      EXPECT_TRUE(name.ends_with("_total")) << name;
    }
    if (family.type == "histogram") {
      // Buckets, then _sum and _count; the last bucket is +Inf.
      ASSERT_GE(family.samples.size(), 3u) << name;
      const size_t n = family.samples.size();
      EXPECT_NE(family.samples[n - 3].find("le=\"+Inf\""), std::string::npos) << name;
      EXPECT_EQ(family.samples[n - 2].rfind(name + "_sum{", 0), 0u) << name;
      EXPECT_EQ(family.samples[n - 1].rfind(name + "_count{", 0), 0u) << name;
    }
  }
}

}  // namespace
}  // namespace pagoda::openai
