// Per-request measurements of a serving benchmark and the aggregate metrics
// computed from them, with exactly the definitions of `vllm bench serve`
// (vllm/benchmarks/serve.py, calculate_metrics):
//   TTFT  = time from sending the request to the first stream chunk that
//           carries a choice (its text may be empty);
//   ITL   = gaps between consecutive choice chunks (one entry per gap);
//   E2EL  = time from sending to the last choice chunk;
//   TPOT  = (E2EL - TTFT) / (output_tokens - 1), only for requests with more
//           than one output token;
//   output tokens = the server's usage.completion_tokens, else the number of
//           choice chunks;
//   goodput = requests meeting every SLO (TTFT, TPOT, E2EL; TPOT counts as 0
//           for one-token requests) per second of benchmark duration.
// Statistics are numpy's: population std, percentiles with linear
// interpolation; an empty sample gives 0 everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::bench {

// What one request measured. Times are seconds; start_time is relative to
// the benchmark start.
struct RequestRecord {
  bool success = false;
  std::string error;          // why it failed (HTTP status, connection, stream)
  int64_t prompt_len = 0;     // dataset length, replaced by usage.prompt_tokens when sent
  int64_t output_tokens = 0;  // usage.completion_tokens; 0 when the server sent none
  int64_t num_chunks = 0;     // stream chunks that carried a choice
  double arrival_time = 0.0;  // scheduled arrival (before any client-side queueing)
  double start_time = 0.0;    // when the request was sent
  double ttft = 0.0;
  double latency = 0.0;     // E2EL
  std::vector<double> itl;  // num_chunks - 1 gaps
};

// The output-token count used by the metrics: usage when present, else chunks.
int64_t output_length(const RequestRecord& r);

// Service-level objectives for goodput, in milliseconds (unset: not checked).
struct SloConfig {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

struct LatencyStats {
  double mean_ms = 0.0;
  double median_ms = 0.0;
  double std_ms = 0.0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value) per requested p
};

struct ServeMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input = 0;   // prompt tokens of successful requests
  int64_t total_output = 0;  // output tokens of successful requests
  double duration_s = 0.0;
  double request_throughput = 0.0;        // completed / duration
  std::optional<double> request_goodput;  // set when an SLO was given
  int64_t num_good = 0;                   // requests meeting every SLO
  double output_throughput = 0.0;         // total_output / duration
  double total_token_throughput = 0.0;    // (total_input + total_output) / duration
  double max_output_tokens_per_s = 0.0;   // chunks in the busiest 1-second bucket
  int64_t max_concurrent_requests = 0;    // peak overlap of [start, start + latency)
  LatencyStats ttft, tpot, itl, e2el;
  std::vector<int64_t> output_lens;  // per request (0 for failed ones)
};

// numpy.percentile(values, p) with linear interpolation; 0 for an empty sample.
double percentile(std::vector<double> values, double p);
// mean, median, population std and the given percentiles of `values_s`
// (seconds), reported in milliseconds.
LatencyStats latency_stats(const std::vector<double>& values_s,
                           const std::vector<double>& percentiles);

// Aggregates the records of one benchmark run that lasted `duration_s`.
ServeMetrics compute_serve_metrics(const std::vector<RequestRecord>& records, double duration_s,
                                   const SloConfig& slo, const std::vector<double>& percentiles);

// Per-request TPOT values (requests with > 1 output token), in seconds.
std::vector<double> tpot_values(const std::vector<RequestRecord>& records);

}  // namespace pagoda::bench
