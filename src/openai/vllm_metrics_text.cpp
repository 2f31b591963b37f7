// vLLM's /metrics families over EngineMetrics: the names, types, help texts,
// label names (model_name, engine) and buckets of vLLM's V1
// PrometheusStatLogger, so that Grafana dashboards and alerts written for
// `vllm serve` read pagoda's /metrics unchanged. pagoda runs one engine,
// engine="0". The deprecated vllm:gpu_cache_usage_perc and
// vllm:time_per_output_token_seconds (older dashboards) carry the same data
// as vllm:kv_cache_usage_perc and vllm:inter_token_latency_seconds.
#include <fmt/format.h>

#include "openai/metrics_text.h"
#include "openai/prometheus_writer.h"

namespace pagoda::openai {

void append_vllm_metrics(std::string& out, const EngineMetrics& m, const std::string& model_name) {
  PrometheusWriter v(out,
                     fmt::format("model_name=\"{}\",engine=\"0\"", escape_label_value(model_name)));
  // Scheduler state.
  v.gauge("vllm:num_requests_running", static_cast<double>(m.num_running),
          "Number of requests in model execution batches.");
  v.gauge("vllm:num_requests_waiting", static_cast<double>(m.num_waiting),
          "Number of requests waiting to be processed.");
  v.gauge("vllm:kv_cache_usage_perc", m.kv_usage, "KV-cache usage. 1 means 100 percent usage.");
  v.gauge("vllm:gpu_cache_usage_perc", m.kv_usage,
          "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc "
          "instead.");
  v.counter("vllm:prefix_cache_queries", static_cast<double>(m.prefix_cache_queries),
            "Prefix cache queries, in terms of number of queried tokens.");
  v.counter("vllm:prefix_cache_hits", static_cast<double>(m.prefix_cache_hits),
            "Prefix cache hits, in terms of number of cached tokens.");
  // Counters.
  v.counter("vllm:num_preemptions", static_cast<double>(m.num_preemptions),
            "Cumulative number of preemption from the engine.");
  v.counter("vllm:prompt_tokens", static_cast<double>(m.prompt_tokens),
            "Number of prefill tokens processed.");
  v.counter("vllm:generation_tokens", static_cast<double>(m.generation_tokens),
            "Number of generation tokens processed.");
  v.labelled_counter("vllm:request_success", "Count of successfully processed requests.",
                     "finished_reason",
                     {{"stop", static_cast<double>(m.finished_stop)},
                      {"length", static_cast<double>(m.finished_length)},
                      {"abort", static_cast<double>(m.finished_abort)}});
  // Speculative decoding, only when it is on (as vLLM's).
  if (!m.spec_accepted_per_position.empty()) {
    v.counter("vllm:spec_decode_num_drafts", static_cast<double>(m.spec_num_drafts),
              "Number of spec decoding drafts.");
    v.counter("vllm:spec_decode_num_draft_tokens", static_cast<double>(m.spec_num_draft_tokens),
              "Number of draft tokens.");
    v.counter("vllm:spec_decode_num_accepted_tokens",
              static_cast<double>(m.spec_num_accepted_tokens), "Number of accepted tokens.");
    v.labelled_counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                       "Accepted tokens per draft position.", "position", spec_positions(m));
  }
  // Histograms of counts.
  v.histogram("vllm:request_prompt_tokens", m.request_prompt_tokens,
              "Number of prefill tokens processed.");
  v.histogram("vllm:request_generation_tokens", m.request_generation_tokens,
              "Number of generation tokens processed.");
  v.histogram("vllm:iteration_tokens_total", m.iteration_tokens,
              "Histogram of number of tokens per engine_step.");
  v.histogram("vllm:request_max_num_generation_tokens", m.request_max_generation_tokens,
              "Histogram of maximum number of requested generation tokens.");
  v.histogram("vllm:request_params_n", m.request_params_n, "Histogram of the n request parameter.");
  v.histogram("vllm:request_params_max_tokens", m.request_params_max_tokens,
              "Histogram of the max_tokens request parameter.");
  v.histogram("vllm:request_prefill_kv_computed_tokens", m.request_prefill_computed_tokens,
              "Histogram of new KV tokens computed during prefill (excluding cached tokens).");
  // Histograms of timing intervals.
  v.histogram("vllm:time_to_first_token_seconds", m.time_to_first_token,
              "Histogram of time to first token in seconds.");
  v.histogram("vllm:inter_token_latency_seconds", m.inter_token_latency,
              "Histogram of inter-token latency in seconds.");
  v.histogram("vllm:time_per_output_token_seconds", m.inter_token_latency,
              "Histogram of time per output token in seconds. DEPRECATED: Use "
              "vllm:inter_token_latency_seconds "
              "instead.");
  v.histogram("vllm:request_time_per_output_token_seconds", m.request_time_per_output_token,
              "Histogram of time_per_output_token_seconds per request.");
  v.histogram("vllm:e2e_request_latency_seconds", m.e2e_latency,
              "Histogram of e2e request latency in seconds.");
  v.histogram("vllm:request_queue_time_seconds", m.queue_time,
              "Histogram of time spent in WAITING phase for request.");
  v.histogram("vllm:request_inference_time_seconds", m.inference_time,
              "Histogram of time spent in RUNNING phase for request.");
  v.histogram("vllm:request_prefill_time_seconds", m.prefill_time,
              "Histogram of time spent in PREFILL phase for request.");
  v.histogram("vllm:request_decode_time_seconds", m.decode_time,
              "Histogram of time spent in DECODE phase for request.");
}

}  // namespace pagoda::openai
