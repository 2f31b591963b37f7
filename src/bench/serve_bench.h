// `pagoda bench serve`: the whole online-serving benchmark against an
// OpenAI-compatible server — dataset, arrival schedule, streamed requests,
// metrics, summary table, result JSON and plots (see docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bench/metrics.h"
#include "core/result.h"
#include "sample/structured_output.h"

namespace pagoda::bench {

enum class DatasetKind { kRandom, kShareGpt, kPrefix };

struct ServeBenchOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";
  std::string model;    // empty: the first model of GET /v1/models
  std::string api_key;  // empty: $OPENAI_API_KEY, if set
  DatasetKind dataset = DatasetKind::kRandom;
  std::string dataset_path;  // ShareGPT JSON; empty: generated ShareGPT-like lengths
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  bool output_len_set = false;  // sharegpt: fixes every output length
  double range_ratio = 0.0;
  int64_t prefix_len = 0;
  int64_t vocab_size = 0;  // > 0: random ids in [0, vocab_size); 0: ids from the server's /tokenize
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int64_t max_concurrency = 0;      // 0: unbounded
  std::vector<double> sweep_rates;  // non-empty: one run per rate (replaces request_rate)
  SloConfig slo;
  std::vector<double> percentiles = {90.0, 99.0};
  uint64_t seed = 0;
  bool ignore_eos = true;
  std::optional<StructuredOutputSpec> constraint;  // set: every request's response_format
  std::string result_json;                         // empty: no file
  std::string plots_dir;                           // empty: no plots
  double ready_timeout_s =
      60.0;  // wait this long for the server's first answer; 0: no test request
  double request_timeout_s = 3600.0;
  bool progress = true;
};

// Runs the benchmark and reports it on stdout (and the files asked for).
// Errors: bad options, unreachable server, dataset problems, a failing test
// request, unwritable outputs. Failed benchmark requests are not errors.
Status run_serve_bench(const ServeBenchOptions& options);

}  // namespace pagoda::bench
