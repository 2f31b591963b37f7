// Reporting of a serving run: the summary table (the layout of
// `vllm bench serve`) and the result JSON (vLLM's field names, plus the run's
// configuration).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/metrics.h"

namespace pagoda::bench {

// What a run was asked to do; echoed into the result JSON.
struct RunConfig {
  std::string base_url;
  std::string endpoint;
  std::string model;
  std::string dataset;       // "random" | "sharegpt" | "prefix"
  std::string dataset_path;  // ShareGPT file, empty for generated data
  int64_t num_prompts = 0;
  double request_rate = 0.0;  // +inf: all at once
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0: unbounded
  int64_t input_len = 0, output_len = 0, prefix_len = 0;
  double range_ratio = 0.0;
  uint64_t seed = 0;
  SloConfig slo;
  std::vector<double> percentiles;
};

// "99" for 99.0, "99.9" for 99.9: the percentile's name in keys and labels.
std::string percentile_word(double p);

// The multi-line summary table.
std::string format_summary(const RunConfig& config, const ServeMetrics& metrics);

// The result object: duration, completed, failed, total_input_tokens,
// total_output_tokens, request_throughput, request_goodput (null without
// SLOs), output_throughput, total_token_throughput, max_output_tokens_per_s,
// max_concurrent_requests, {mean,median,std,p<N>}_{ttft,tpot,itl,e2el}_ms,
// per-request input_lens, output_lens, ttfts, itls, latencies, start_times,
// queue_times, errors (seconds), and the configuration fields.
nlohmann::json result_json(const RunConfig& config, const ServeMetrics& metrics,
                           const std::vector<RequestRecord>& records);

}  // namespace pagoda::bench
