#include "openai/metrics_text.h"

#include <fmt/format.h>

#include <cmath>

namespace pagoda::openai {

namespace {

std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

class Exposition {
 public:
  explicit Exposition(const std::string& model_name)
      : labels_(fmt::format("model_name=\"{}\"", escape_label(model_name))) {}

  void header(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const char* name, double value, const std::string& extra_labels = "") {
    out_ += fmt::format("{}{{{}{}}} {}\n", name, labels_, extra_labels, number(value));
  }
  void gauge(const char* name, double value, const char* help) {
    header(name, "gauge", help);
    sample(name, value);
  }
  // `name` without the _total suffix. In text format 0.0.4 a counter's HELP and
  // TYPE lines name its samples, `name`_total, as Prometheus' own clients
  // write them; parsers then read the family as `name`.
  void counter(const std::string& name, double value, const char* help) {
    const std::string total = name + "_total";
    header(total.c_str(), "counter", help);
    sample(total.c_str(), value);
  }
  void histogram(const std::string& name, const Histogram& h, const char* help) {
    header(name.c_str(), "histogram", help);
    const std::string bucket = name + "_bucket";
    for (size_t i = 0; i < h.bounds.size() && i < h.counts.size(); ++i) {
      sample(bucket.c_str(), static_cast<double>(h.counts[i]),
             fmt::format(",le=\"{}\"", number(h.bounds[i])));
    }
    sample(bucket.c_str(), static_cast<double>(h.count), ",le=\"+Inf\"");
    sample((name + "_sum").c_str(), h.sum);
    sample((name + "_count").c_str(), static_cast<double>(h.count));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string labels_;
  std::string out_;
};

}  // namespace

std::string format_prometheus(const EngineMetrics& m, const std::string& model_name) {
  Exposition e(model_name);
  e.gauge("pagoda:num_requests_running", static_cast<double>(m.num_running),
          "Number of requests in the running batch.");
  e.gauge("pagoda:num_requests_waiting", static_cast<double>(m.num_waiting),
          "Number of requests waiting to be scheduled.");
  e.gauge("pagoda:kv_cache_usage_perc", m.kv_usage,
          "Fraction of KV-cache blocks in use (1 = full).");
  e.counter("pagoda:prefix_cache_queries", static_cast<double>(m.prefix_cache_queries),
            "Prompt tokens looked up in the prefix cache.");
  e.counter("pagoda:prefix_cache_hits", static_cast<double>(m.prefix_cache_hits),
            "Prompt tokens found in the prefix cache.");
  e.counter("pagoda:num_preemptions", static_cast<double>(m.num_preemptions),
            "Cumulative number of preemptions.");
  e.counter("pagoda:prompt_tokens", static_cast<double>(m.prompt_tokens),
            "Prompt tokens of admitted requests.");
  e.counter("pagoda:generation_tokens", static_cast<double>(m.generation_tokens),
            "Generated tokens.");
  e.counter("pagoda:engine_steps", static_cast<double>(m.steps.steps),
            "Engine steps that ran the model.");
  e.counter("pagoda:engine_step_seconds", m.steps.seconds,
            "Wall time of those steps on the engine thread.");
  e.counter("pagoda:engine_step_device_wait_seconds", m.steps.device_wait_seconds,
            "Part of the step time spent waiting for the device (the rest is host work).");
  e.counter("pagoda:engine_detokenize_seconds", m.detokenize_seconds,
            "Part of the step time spent detokenizing sampled tokens and checking stop conditions.");
  e.counter("pagoda:engine_steps_overlapped", static_cast<double>(m.overlapped_steps),
            "Steps during which the next step was planned and launched (async scheduling).");
  e.header("pagoda:request_success_total", "counter", "Finished requests by finish reason.");
  e.sample("pagoda:request_success_total", static_cast<double>(m.finished_stop),
           ",finished_reason=\"stop\"");
  e.sample("pagoda:request_success_total", static_cast<double>(m.finished_length),
           ",finished_reason=\"length\"");
  e.sample("pagoda:request_success_total", static_cast<double>(m.finished_abort),
           ",finished_reason=\"abort\"");
  e.histogram("pagoda:time_to_first_token_seconds", m.time_to_first_token,
              "Time from arrival to the first generated token.");
  e.histogram("pagoda:time_per_output_token_seconds", m.time_per_output_token,
              "Time between consecutive generated tokens.");
  e.histogram("pagoda:e2e_request_latency_seconds", m.e2e_latency,
              "Time from arrival to the last generated token.");
  e.histogram("pagoda:request_queue_time_seconds", m.queue_time,
              "Time a request spent waiting before its first schedule.");
  return e.take();
}

}  // namespace pagoda::openai
