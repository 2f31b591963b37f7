#include "bench/report.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>

namespace pagoda::bench {

namespace {

using nlohmann::json;

void line(std::string& out, const std::string& label, const std::string& value) {
  out += fmt::format("{:<40} {:<10}\n", label, value);
}

std::string f2(double v) {
  return fmt::format("{:.2f}", v);
}

void latency_block(std::string& out, const std::string& header, const std::string& name,
                   const LatencyStats& s) {
  out += fmt::format("{:-^50}\n", header);
  line(out, fmt::format("Mean {} (ms):", name), f2(s.mean_ms));
  line(out, fmt::format("Median {} (ms):", name), f2(s.median_ms));
  for (const auto& [p, v] : s.percentiles_ms)
    line(out, fmt::format("P{} {} (ms):", percentile_word(p), name), f2(v));
}

void latency_fields(json& j, const std::string& key, const LatencyStats& s) {
  j[fmt::format("mean_{}_ms", key)] = s.mean_ms;
  j[fmt::format("median_{}_ms", key)] = s.median_ms;
  j[fmt::format("std_{}_ms", key)] = s.std_ms;
  for (const auto& [p, v] : s.percentiles_ms)
    j[fmt::format("p{}_{}_ms", percentile_word(p), key)] = v;
}

json rate_json(double rate) {
  return std::isinf(rate) ? json("inf") : json(rate);
}

std::string now_iso8601() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json config_json(const RunConfig& c) {
  json slo = json::object();
  if (c.slo.ttft_ms) slo["ttft"] = *c.slo.ttft_ms;
  if (c.slo.tpot_ms) slo["tpot"] = *c.slo.tpot_ms;
  if (c.slo.e2el_ms) slo["e2el"] = *c.slo.e2el_ms;
  return {{"date", now_iso8601()},
          {"backend", "pagoda-bench"},
          {"base_url", c.base_url},
          {"endpoint", c.endpoint},
          {"model_id", c.model},
          {"dataset", c.dataset},
          {"dataset_path", c.dataset_path},
          {"num_prompts", c.num_prompts},
          {"request_rate", rate_json(c.request_rate)},
          {"burstiness", c.burstiness},
          {"max_concurrency", c.max_concurrency > 0 ? json(c.max_concurrency) : json(nullptr)},
          {"input_len", c.input_len},
          {"output_len", c.output_len},
          {"prefix_len", c.prefix_len},
          {"range_ratio", c.range_ratio},
          {"seed", c.seed},
          {"goodput_slo_ms", slo},
          {"percentiles", c.percentiles}};
}

}  // namespace

std::string percentile_word(double p) {
  if (p == std::floor(p)) return fmt::format("{}", static_cast<int64_t>(p));
  return fmt::format("{}", p);
}

std::string format_summary(const RunConfig& config, const ServeMetrics& m) {
  std::string out = fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  line(out, "Successful requests:", std::to_string(m.completed));
  line(out, "Failed requests:", std::to_string(m.failed));
  if (config.max_concurrency > 0)
    line(out, "Maximum request concurrency:", std::to_string(config.max_concurrency));
  if (!std::isinf(config.request_rate))
    line(out, "Request rate configured (RPS):", f2(config.request_rate));
  line(out, "Benchmark duration (s):", f2(m.duration_s));
  line(out, "Total input tokens:", std::to_string(m.total_input));
  line(out, "Total generated tokens:", std::to_string(m.total_output));
  line(out, "Request throughput (req/s):", f2(m.request_throughput));
  if (m.request_goodput) line(out, "Request goodput (req/s):", f2(*m.request_goodput));
  line(out, "Output token throughput (tok/s):", f2(m.output_throughput));
  line(out, "Peak output token throughput (tok/s):", f2(m.max_output_tokens_per_s));
  line(out, "Peak concurrent requests:", std::to_string(m.max_concurrent_requests));
  line(out, "Total token throughput (tok/s):", f2(m.total_token_throughput));
  latency_block(out, "Time to First Token", "TTFT", m.ttft);
  latency_block(out, "Time per Output Token (excl. 1st token)", "TPOT", m.tpot);
  latency_block(out, "Inter-token Latency", "ITL", m.itl);
  latency_block(out, "End-to-end Latency", "E2EL", m.e2el);
  out += std::string(50, '=') + "\n";
  return out;
}

json result_json(const RunConfig& config, const ServeMetrics& m,
                 const std::vector<RequestRecord>& records) {
  json j = config_json(config);
  j["duration"] = m.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = m.request_goodput ? json(*m.request_goodput) : json(nullptr);
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  latency_fields(j, "ttft", m.ttft);
  latency_fields(j, "tpot", m.tpot);
  latency_fields(j, "itl", m.itl);
  latency_fields(j, "e2el", m.e2el);
  json input_lens = json::array(), ttfts = json::array(), itls = json::array(),
       latencies = json::array(), start_times = json::array(), queue_times = json::array(),
       errors = json::array();
  for (const auto& r : records) {
    input_lens.push_back(r.prompt_len);
    ttfts.push_back(r.ttft);
    itls.push_back(r.itl);
    latencies.push_back(r.latency);
    start_times.push_back(r.start_time);
    queue_times.push_back(r.start_time - r.arrival_time);
    errors.push_back(r.error);
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = m.output_lens;
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["latencies"] = std::move(latencies);
  j["start_times"] = std::move(start_times);
  j["queue_times"] = std::move(queue_times);
  j["errors"] = std::move(errors);
  return j;
}

}  // namespace pagoda::bench
