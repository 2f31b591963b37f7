#include "engine/metrics_recorder.h"

namespace pagoda {
namespace {

// Upper bounds in seconds (vLLM's buckets, trimmed).
Histogram make_histogram(std::vector<double> bounds) {
  Histogram h;
  h.counts.assign(bounds.size(), 0);
  h.bounds = std::move(bounds);
  return h;
}

}  // namespace

void observe(Histogram& h, double value) {
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    if (value <= h.bounds[i]) ++h.counts[i];
  }
  h.sum += value;
  ++h.count;
}

MetricsRecorder::MetricsRecorder() {
  m_.time_to_first_token = make_histogram({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                           0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0});
  m_.time_per_output_token = make_histogram({0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
                                             0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0});
  m_.e2e_latency = make_histogram({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                                   50.0, 60.0, 120.0, 240.0, 480.0, 960.0});
  m_.queue_time = make_histogram({0.001, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0,
                                  10.0, 20.0, 40.0, 80.0, 160.0});
}

void MetricsRecorder::on_admitted(int64_t num_prompt_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  m_.prompt_tokens += static_cast<uint64_t>(num_prompt_tokens);
}

void MetricsRecorder::on_tokens(int64_t num_generated) {
  std::lock_guard<std::mutex> lock(mu_);
  m_.generation_tokens += static_cast<uint64_t>(num_generated);
}

void MetricsRecorder::on_first_token(double ttft_s, double queue_s) {
  std::lock_guard<std::mutex> lock(mu_);
  observe(m_.time_to_first_token, ttft_s);
  observe(m_.queue_time, queue_s);
}

void MetricsRecorder::on_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  observe(m_.time_per_output_token, seconds);
}

void MetricsRecorder::on_finished(FinishReason reason, double e2e_s) {
  std::lock_guard<std::mutex> lock(mu_);
  switch (reason) {
    case FinishReason::kStop: ++m_.finished_stop; break;
    case FinishReason::kLength: ++m_.finished_length; break;
    case FinishReason::kAbort: ++m_.finished_abort; break;
  }
  observe(m_.e2e_latency, e2e_s);
}

void MetricsRecorder::on_step(double seconds, double device_wait_seconds, double detokenize_seconds, bool graph,
                              bool overlapped) {
  std::lock_guard<std::mutex> lock(mu_);
  m_.steps.add(seconds, device_wait_seconds);
  m_.detokenize_seconds += detokenize_seconds;
  if (graph) m_.graph_steps.add(seconds, device_wait_seconds);
  if (overlapped) ++m_.overlapped_steps;
}

void MetricsRecorder::set_state(int64_t num_running, int64_t num_waiting, int64_t num_preemptions,
                                double kv_usage, int64_t prefix_queries, int64_t prefix_hits) {
  std::lock_guard<std::mutex> lock(mu_);
  m_.num_running = num_running;
  m_.num_waiting = num_waiting;
  m_.num_preemptions = static_cast<uint64_t>(num_preemptions);
  m_.kv_usage = kv_usage;
  m_.prefix_cache_queries = static_cast<uint64_t>(prefix_queries);
  m_.prefix_cache_hits = static_cast<uint64_t>(prefix_hits);
}

EngineMetrics MetricsRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return m_;
}

}  // namespace pagoda
