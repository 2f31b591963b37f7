#include "engine/metrics_recorder.h"

#include <algorithm>

#include "engine/histogram.h"

namespace pagoda {

MetricsRecorder::MetricsRecorder(int64_t max_model_len, int32_t num_speculative_tokens)
    : m_(make_engine_metrics(max_model_len)) {
  m_.spec_accepted_per_position.assign(static_cast<size_t>(num_speculative_tokens), 0);
}

void MetricsRecorder::on_spec_verified(int32_t num_drafted, int32_t num_accepted) {
  std::lock_guard<std::mutex> lock(mu_);
  ++m_.spec_num_drafts;
  m_.spec_num_draft_tokens += static_cast<uint64_t>(num_drafted);
  m_.spec_num_accepted_tokens += static_cast<uint64_t>(num_accepted);
  const auto n = std::min(static_cast<size_t>(num_accepted), m_.spec_accepted_per_position.size());
  for (size_t j = 0; j < n; ++j) ++m_.spec_accepted_per_position[j];
}

void MetricsRecorder::set_spec_backoff_cap(int32_t cap, std::optional<double> extra_cost) {
  std::lock_guard<std::mutex> lock(mu_);
  m_.spec_backoff_cap = cap;
  m_.spec_verify_extra_cost = extra_cost;
}

void MetricsRecorder::on_tokens(int64_t num_generated) {
  std::lock_guard<std::mutex> lock(mu_);
  m_.generation_tokens += static_cast<uint64_t>(num_generated);
}

void MetricsRecorder::on_first_token(double ttft_s, int64_t num_prompt_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  observe(m_.time_to_first_token, ttft_s);
  m_.prompt_tokens += static_cast<uint64_t>(num_prompt_tokens);
}

void MetricsRecorder::on_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  observe(m_.inter_token_latency, seconds);
}

void MetricsRecorder::on_finished(const FinishedRequestStats& s) {
  std::lock_guard<std::mutex> lock(mu_);
  switch (s.reason) {
    case FinishReason::kStop:
      ++m_.finished_stop;
      break;
    case FinishReason::kLength:
      ++m_.finished_length;
      break;
    case FinishReason::kAbort:
      ++m_.finished_abort;
      break;
  }
  observe(m_.e2e_latency, s.e2e_s);
  observe(m_.queue_time, s.queue_s);
  observe(m_.prefill_time, s.prefill_s);
  observe(m_.decode_time, s.decode_s);
  observe(m_.inference_time, s.inference_s);
  observe(
      m_.request_time_per_output_token,
      s.max_sample_tokens > 1 ? s.decode_s / static_cast<double>(s.max_sample_tokens - 1) : 0.0);
  observe(m_.request_prompt_tokens, static_cast<double>(s.num_prompt_tokens));
  observe(m_.request_generation_tokens, static_cast<double>(s.num_generation_tokens));
  observe(m_.request_max_generation_tokens, static_cast<double>(s.max_sample_tokens));
  observe(m_.request_prefill_computed_tokens,
          static_cast<double>(s.num_prompt_tokens - s.num_cached_prompt_tokens));
  observe(m_.request_params_n, static_cast<double>(s.n));
  observe(m_.request_params_max_tokens, static_cast<double>(s.max_tokens));
}

void MetricsRecorder::on_launch(int64_t num_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  observe(m_.iteration_tokens, static_cast<double>(num_tokens));
}

void MetricsRecorder::on_step(double seconds, double device_wait_seconds, double detokenize_seconds,
                              bool graph, bool decode_only, bool overlapped,
                              bool held) {
  std::lock_guard<std::mutex> lock(mu_);
  m_.steps.add(seconds, device_wait_seconds);
  m_.detokenize_seconds += detokenize_seconds;
  if (graph) m_.graph_steps.add(seconds, device_wait_seconds);
  if (decode_only) ++m_.decode_only_steps;
  if (overlapped) ++m_.overlapped_steps;
  if (held) ++m_.held_steps;
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
