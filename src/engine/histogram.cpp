#include "engine/histogram.h"

#include <algorithm>

namespace pagoda {

Histogram make_histogram(std::vector<double> bounds) {
  Histogram h;
  h.counts.assign(bounds.size(), 0);
  h.bounds = std::move(bounds);
  return h;
}

void observe(Histogram& h, double value) {
  // First bound >= value; that bucket and every later one count it.
  const auto first = std::lower_bound(h.bounds.begin(), h.bounds.end(), value);
  for (auto i = static_cast<size_t>(first - h.bounds.begin()); i < h.counts.size(); ++i)
    ++h.counts[i];
  h.sum += value;
  ++h.count;
}

std::vector<double> buckets_1_2_5(int64_t max_value) {
  std::vector<double> out;
  for (int64_t scale = 1;; scale *= 10) {
    for (int64_t m : {1, 2, 5}) {
      if (m * scale > max_value) return out;
      out.push_back(static_cast<double>(m * scale));
    }
    if (scale > max_value / 10) return out;  // the next scale's 1 is past max_value
  }
}

// The layouts of vLLM's PrometheusStatLogger (vllm/v1/metrics/loggers.py).
std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> inter_token_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> request_latency_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> iteration_tokens_buckets() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}

std::vector<double> params_n_buckets() {
  return {1, 2, 5, 10, 20};
}

EngineMetrics make_engine_metrics(int64_t max_model_len) {
  EngineMetrics m;
  m.time_to_first_token = make_histogram(ttft_buckets());
  m.inter_token_latency = make_histogram(inter_token_buckets());
  m.request_time_per_output_token = make_histogram(inter_token_buckets());
  for (Histogram* h :
       {&m.e2e_latency, &m.queue_time, &m.prefill_time, &m.decode_time, &m.inference_time}) {
    *h = make_histogram(request_latency_buckets());
  }
  for (Histogram* h :
       {&m.request_prompt_tokens, &m.request_generation_tokens, &m.request_max_generation_tokens,
        &m.request_prefill_computed_tokens, &m.request_params_max_tokens}) {
    *h = make_histogram(buckets_1_2_5(max_model_len));
  }
  m.request_params_n = make_histogram(params_n_buckets());
  m.iteration_tokens = make_histogram(iteration_tokens_buckets());
  return m;
}

}  // namespace pagoda
