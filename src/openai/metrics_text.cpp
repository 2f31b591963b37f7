#include "openai/metrics_text.h"

#include <fmt/format.h>

#include "openai/prometheus_writer.h"

namespace pagoda::openai {

std::vector<std::pair<std::string, double>> spec_positions(const EngineMetrics& m) {
  std::vector<std::pair<std::string, double>> out;
  for (size_t j = 0; j < m.spec_accepted_per_position.size(); ++j) {
    out.emplace_back(std::to_string(j), static_cast<double>(m.spec_accepted_per_position[j]));
  }
  return out;
}

std::string format_prometheus(const EngineMetrics& m, const std::string& model_name,
                              const ModelInfo& info) {
  std::string out;
  PrometheusWriter e(out, fmt::format("model_name=\"{}\"", escape_label_value(model_name)));
  e.gauge("pagoda:num_requests_running", static_cast<double>(m.num_running),
          "Number of requests in the running batch.");
  e.gauge("pagoda:num_requests_waiting", static_cast<double>(m.num_waiting),
          "Number of requests waiting to be scheduled.");
  e.gauge("pagoda:kv_cache_usage_perc", m.kv_usage,
          "Fraction of KV-cache blocks in use (1 = full).");
  e.gauge("pagoda:tensor_parallel_size", static_cast<double>(info.tensor_parallel_size),
          "Ranks (GPUs, or cpu threads) the model is split over (--tensor-parallel-size).");
  e.gauge("pagoda:pipeline_parallel_size", static_cast<double>(info.pipeline_parallel_size),
          "Pipeline stages the model's layers are split into (--pipeline-parallel-size).");
  e.gauge("pagoda:kv_cache_capacity_tokens", static_cast<double>(info.kv_capacity_tokens),
          "Tokens the KV cache holds (its blocks times the block size; the full-attention "
          "layers' pool with two KV groups).");
  e.info("pagoda:kv_cache_info",
         "The KV cache's configuration: element type (--kv-cache-dtype) and block size.",
         fmt::format("cache_dtype=\"{}\",block_size=\"{}\"",
                     escape_label_value(info.kv_cache_dtype), info.block_size));
  if (!info.weight_precision.empty())
    e.info("pagoda:weight_precision_info",
           "The linear layers' weight precision (label precision), e.g. bf16 or fp8 (w8a8, ...).",
           "precision", info.weight_precision);
  e.counter("pagoda:prefix_cache_queries", static_cast<double>(m.prefix_cache_queries),
            "Prompt tokens looked up in the prefix cache.");
  e.counter("pagoda:prefix_cache_hits", static_cast<double>(m.prefix_cache_hits),
            "Prompt tokens found in the prefix cache.");
  e.counter("pagoda:num_preemptions", static_cast<double>(m.num_preemptions),
            "Cumulative number of preemptions.");
  e.counter("pagoda:prompt_tokens", static_cast<double>(m.prompt_tokens),
            "Prompt tokens of requests whose prefill finished.");
  e.counter("pagoda:generation_tokens", static_cast<double>(m.generation_tokens),
            "Generated tokens.");
  e.counter("pagoda:engine_steps", static_cast<double>(m.steps.steps),
            "Engine steps that ran the model.");
  e.counter("pagoda:engine_step_seconds", m.steps.seconds,
            "Wall time of those steps on the engine thread.");
  e.counter("pagoda:engine_step_device_wait_seconds", m.steps.device_wait_seconds,
            "Part of the step time spent waiting for the device (the rest is host work).");
  e.counter(
      "pagoda:engine_detokenize_seconds", m.detokenize_seconds,
      "Part of the step time spent detokenizing sampled tokens and checking stop conditions.");
  e.counter("pagoda:engine_steps_overlapped", static_cast<double>(m.overlapped_steps),
            "Steps during which the next step was planned and launched (async scheduling).");
  e.counter("pagoda:engine_steps_held", static_cast<double>(m.held_steps),
            "Steps that could have overlapped the next one but were held by the adaptive rule "
            "(a small batch shortly after a busy arrival).");
  e.labelled_counter("pagoda:request_success", "Finished requests by finish reason.",
                     "finished_reason",
                     {{"stop", static_cast<double>(m.finished_stop)},
                      {"length", static_cast<double>(m.finished_length)},
                      {"abort", static_cast<double>(m.finished_abort)}});
  e.histogram("pagoda:time_to_first_token_seconds", m.time_to_first_token,
              "Time from arrival to the first generated token.");
  e.histogram("pagoda:time_per_output_token_seconds", m.inter_token_latency,
              "Time between consecutive generated tokens.");
  e.histogram("pagoda:e2e_request_latency_seconds", m.e2e_latency,
              "Time from arrival to the end of the request.");
  e.histogram("pagoda:request_queue_time_seconds", m.queue_time,
              "Time a request spent waiting before its first schedule.");
  if (!m.spec_accepted_per_position.empty()) {
    e.counter("pagoda:spec_decode_num_drafts", static_cast<double>(m.spec_num_drafts),
              "Speculative decoding: verifications of a drafted sequence.");
    e.counter("pagoda:spec_decode_num_draft_tokens", static_cast<double>(m.spec_num_draft_tokens),
              "Speculative decoding: tokens drafted.");
    e.counter("pagoda:spec_decode_num_accepted_tokens",
              static_cast<double>(m.spec_num_accepted_tokens),
              "Speculative decoding: drafted tokens accepted.");
    e.labelled_counter("pagoda:spec_decode_num_accepted_tokens_per_pos",
                       "Speculative decoding: drafted tokens accepted at each draft position.",
                       "position", spec_positions(m));
    e.gauge("pagoda:spec_backoff_cap", static_cast<double>(m.spec_backoff_cap),
            "Speculative decoding: the most steps a sample whose drafts keep missing waits "
            "(picked from the measured cost of verification; 0 before the first step).");
    if (m.spec_verify_extra_cost)
      e.gauge("pagoda:spec_verify_extra_cost", *m.spec_verify_extra_cost,
              "Speculative decoding: r, the measured extra cost of a verifying step in plain "
              "steps for the last step's batch size, from which the back-off cap is picked "
              "(absent until measured).");
  }
  append_vllm_metrics(out, m, model_name);
  return out;
}

}  // namespace pagoda::openai
