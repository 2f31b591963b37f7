#include "bench/inproc/inproc_report.h"

#include <fmt/format.h>

#include <cmath>

#include "bench/metrics.h"

namespace pagoda::bench {

namespace {

using nlohmann::json;

void stats(json& j, const std::string& key, const std::vector<double>& values_s) {
  auto s = latency_stats(values_s, {90, 99});
  j[key + "_mean_ms"] = s.mean_ms;
  j[key + "_median_ms"] = s.median_ms;
  j[key + "_p90_ms"] = s.percentiles_ms[0].second;
  j[key + "_p99_ms"] = s.percentiles_ms[1].second;
}

void line(std::string& out, const std::string& label, const std::string& value) {
  out += fmt::format("{:<40} {}\n", label, value);
}

std::string num(const json& j, const char* key, const char* unit = "") {
  if (!j.contains(key) || j[key].is_null()) return "n/a";
  return fmt::format("{:.2f}{}", j[key].get<double>(), unit);
}

// vLLM's spec_decode summary: mean accepted length = 1 + accepted / drafts
// (tokens per verification step, the target's own token included),
// acceptance rate = accepted / drafted tokens, and per position j the share
// of drafts whose token j was accepted. Only when speculation was on.
void spec_fields(json& j, const SpecTotals& s) {
  if (s.accepted_per_position.empty()) return;
  const double drafts = static_cast<double>(s.num_drafts);
  j["spec_num_drafts"] = s.num_drafts;
  j["spec_num_draft_tokens"] = s.num_draft_tokens;
  j["spec_num_accepted_tokens"] = s.num_accepted_tokens;
  j["spec_accepted_per_position"] = s.accepted_per_position;
  j["spec_mean_accepted_length"] =
      s.num_drafts > 0 ? json(1.0 + static_cast<double>(s.num_accepted_tokens) / drafts)
                       : json(nullptr);
  j["spec_acceptance_rate"] = s.num_draft_tokens > 0
                                  ? json(static_cast<double>(s.num_accepted_tokens) /
                                         static_cast<double>(s.num_draft_tokens))
                                  : json(nullptr);
  json per_pos = json::array();
  for (uint64_t a : s.accepted_per_position)
    per_pos.push_back(s.num_drafts > 0 ? json(static_cast<double>(a) / drafts) : json(nullptr));
  j["spec_acceptance_per_position"] = per_pos;
  j["spec_backoff_cap"] = s.backoff_cap;
  j["spec_verify_extra_cost"] = s.verify_extra_cost ? json(*s.verify_extra_cost) : json(nullptr);
}

json host_us(const StepTimes& t) {
  return t.steps > 0
             ? json((t.seconds - t.device_wait_seconds) / static_cast<double>(t.steps) * 1e6)
             : json(nullptr);
}

void step_fields(json& j, const StepTotals& s) {
  j["num_steps"] = s.all.steps;
  j["num_graph_steps"] = s.graph.steps;
  j["num_decode_only_steps"] = s.decode_only;
  j["num_overlapped_steps"] = s.overlapped;
  j["num_held_steps"] = s.held;
  j["host_us_per_step"] = host_us(s.all);
  j["host_us_per_graph_step"] = host_us(s.graph);
  j["host_us_per_eager_step"] = host_us(s.all.minus(s.graph));
  j["device_wait_pct"] =
      s.all.seconds > 0 ? json(100.0 * s.all.device_wait_seconds / s.all.seconds) : json(nullptr);
  spec_fields(j, s.spec);
}

// Host time = step wall time minus the wait for sampled ids; for eager steps
// it includes kernel launches, which the device overlaps.
void step_lines(std::string& out, const json& j) {
  line(out, "Engine steps (graph replays, decode-only, overlapped, held):",
       fmt::format("{} ({}, {}, {}, {})", j.value("num_steps", uint64_t{0}),
                   j.value("num_graph_steps", uint64_t{0}),
                   j.value("num_decode_only_steps", uint64_t{0}),
                   j.value("num_overlapped_steps", uint64_t{0}),
                   j.value("num_held_steps", uint64_t{0})));
  line(out, "Host us/step outside the device wait:", num(j, "host_us_per_step"));
  line(out, "  graph steps / eager steps (us):",
       fmt::format("{} / {}", num(j, "host_us_per_graph_step"), num(j, "host_us_per_eager_step")));
  line(out, "Step time waiting for the device (%):", num(j, "device_wait_pct"));
  if (!j.contains("spec_num_drafts")) return;
  line(out, "Speculation: drafts / drafted / accepted:",
       fmt::format("{} / {} / {}", j["spec_num_drafts"].get<uint64_t>(),
                   j["spec_num_draft_tokens"].get<uint64_t>(),
                   j["spec_num_accepted_tokens"].get<uint64_t>()));
  line(out, "  mean accepted length (tokens/step):", num(j, "spec_mean_accepted_length"));
  line(out, "  acceptance rate:", num(j, "spec_acceptance_rate"));
  std::string per_pos;
  for (const json& v : j["spec_acceptance_per_position"]) {
    if (!per_pos.empty()) per_pos += ' ';
    per_pos += v.is_null() ? std::string("n/a") : fmt::format("{:.3f}", v.get<double>());
  }
  line(out, "  acceptance per position:", per_pos);
  line(out, "  back-off cap (steps):", std::to_string(j.value("spec_backoff_cap", 0)));
  line(out, "  verifying step's extra cost r:", num(j, "spec_verify_extra_cost"));
}

}  // namespace

json latency_report(const LatencyReportInputs& in) {
  const auto& o = in.options;
  json j = {{"bench", "latency"},
            {"model", in.model},
            {"device", in.device},
            {"dataset", o.dataset},
            {"input_len", o.input_len},
            {"mean_prompt_tokens", in.result.mean_prompt_tokens},
            {"output_len", o.output_len},
            {"batch_size", o.batch_size},
            {"num_iters", o.num_iters},
            {"num_warmup", o.num_warmup},
            {"min_output_tokens", in.result.min_output_tokens},
            {"num_params", in.cost.num_params}};
  stats(j, "ttft", in.result.ttft_s);
  stats(j, "tpot", in.result.tpot_s);
  stats(j, "latency", in.result.latency_s);
  // The prompts' real mean length (W7's prompts are at most input_len).
  const double prompt_len = in.result.mean_prompt_tokens > 0 ? in.result.mean_prompt_tokens
                                                             : static_cast<double>(o.input_len);
  double context = prompt_len + static_cast<double>(o.output_len - 1) / 2.0;
  double bytes = decode_bytes_per_step(in.cost, in.bytes_per_weight, in.bytes_per_kv_elem,
                                       o.batch_size, context);
  double tpot_s = j["tpot_mean_ms"].get<double>() / 1000.0;
  j["decode_bytes_per_step"] = bytes;
  j["decode_weight_bytes"] = decode_weight_params_at(in.cost, o.batch_size) * in.bytes_per_weight;
  if (in.tensor_parallel_size > 1 || in.pipeline_parallel_size > 1) {
    bytes = decode_bytes_per_rank(in.cost, in.bytes_per_weight, in.bytes_per_kv_elem, o.batch_size,
                                  context, in.tensor_parallel_size);
    j["tensor_parallel_size"] = in.tensor_parallel_size;
    j["pipeline_parallel_size"] = in.pipeline_parallel_size;
    j["decode_bytes_per_rank"] = bytes;
  }
  j["achieved_gbps"] = tpot_s > 0 ? json(bytes / tpot_s / 1e9) : json(nullptr);
  j["decode_tok_s"] = tpot_s > 0 ? json(static_cast<double>(o.batch_size) / tpot_s) : json(nullptr);
  if (in.bandwidth) {
    j["ceiling_gbps"] = in.bandwidth->bytes_per_s / 1e9;
    j["ceiling_method"] = in.bandwidth->method;
    j["speed_of_light_tpot_ms"] = bytes / in.bandwidth->bytes_per_s * 1000.0;
    j["pct_of_speed_of_light"] =
        tpot_s > 0 ? json(100.0 * bytes / in.bandwidth->bytes_per_s / tpot_s) : json(nullptr);
  }
  double ttft_s = j["ttft_mean_ms"].get<double>() / 1000.0;
  double flops = static_cast<double>(o.batch_size) *
                 prefill_flops(in.cost, static_cast<int64_t>(std::llround(prompt_len)));
  j["prefill_tok_s"] =
      ttft_s > 0 ? json(static_cast<double>(o.batch_size) * prompt_len / ttft_s) : json(nullptr);
  const double latency_s = j["latency_mean_ms"].get<double>() / 1000.0;
  j["output_tok_s"] = latency_s > 0
                          ? json(static_cast<double>(o.batch_size * o.output_len) / latency_s)
                          : json(nullptr);
  j["prefill_tflops"] = ttft_s > 0 ? json(flops / ttft_s / 1e12) : json(nullptr);
  if (in.matrix_flops_per_s > 0 && ttft_s > 0) {
    j["matrix_ceiling_tflops"] = in.matrix_flops_per_s / 1e12;
    j["pct_of_matrix_ceiling"] = 100.0 * flops / ttft_s / in.matrix_flops_per_s;
  }
  step_fields(j, in.result.steps);
  return j;
}

std::string format_latency_report(const json& j) {
  std::string out = fmt::format("{:=^60}\n", " Latency (in-process) ");
  line(out, "Model / device:",
       fmt::format("{} / {}", j["model"].get<std::string>(), j["device"].get<std::string>()));
  line(out, "Batch x input -> output tokens:",
       fmt::format("{} x {} -> {} ({}, mean prompt {:.1f})", j["batch_size"].get<int64_t>(),
                   j["input_len"].get<int64_t>(), j["output_len"].get<int64_t>(),
                   j["dataset"].get<std::string>(), j["mean_prompt_tokens"].get<double>()));
  for (auto [key, label] :
       {std::pair{"ttft", "TTFT"}, std::pair{"tpot", "TPOT"}, std::pair{"latency", "E2E"}}) {
    line(out, fmt::format("{} mean / median / p99 (ms):", label),
         fmt::format("{} / {} / {}", num(j, fmt::format("{}_mean_ms", key).c_str()),
                     num(j, fmt::format("{}_median_ms", key).c_str()),
                     num(j, fmt::format("{}_p99_ms", key).c_str())));
  }
  line(out, "Decode tok/s (batch / mean TPOT):", num(j, "decode_tok_s"));
  line(out, "Output tok/s (batch * output / E2E):", num(j, "output_tok_s"));
  line(out, "Bytes read per decode step (MB):",
       fmt::format("{:.2f}", j["decode_bytes_per_step"].get<double>() / 1e6));
  if (j.contains("decode_bytes_per_rank")) {
    line(out, "Parallelism (tensor x pipeline):",
         fmt::format("{} x {}", j["tensor_parallel_size"].get<int>(), j["pipeline_parallel_size"].get<int>()));
    line(out, "Bytes per GPU on the critical path (MB):",
         fmt::format("{:.2f}", j["decode_bytes_per_rank"].get<double>() / 1e6));
  }
  line(out, "Achieved bandwidth (GB/s):", num(j, "achieved_gbps"));
  line(out, "Bandwidth ceiling (GB/s):",
       j.contains("ceiling_gbps")
           ? fmt::format("{} ({})", num(j, "ceiling_gbps"), j["ceiling_method"].get<std::string>())
           : "not measured (pass --ceiling-gbps)");
  line(out, "Speed-of-light TPOT (ms):", num(j, "speed_of_light_tpot_ms"));
  line(out, "TPOT vs speed of light (%):", num(j, "pct_of_speed_of_light"));
  line(out, "Prefill tok/s (batch * input / TTFT):", num(j, "prefill_tok_s"));
  line(out, "Prefill TFLOP/s:", num(j, "prefill_tflops"));
  line(out, "Prefill vs matrix ceiling (%):", num(j, "pct_of_matrix_ceiling"));
  step_lines(out, j);
  return out + std::string(60, '=') + "\n";
}

json throughput_report(const ThroughputBenchOptions& o, const ThroughputBenchResult& r,
                       const std::string& model, const std::string& device) {
  double d = r.elapsed_s > 0 ? r.elapsed_s : 1.0;
  json j = {{"bench", "throughput"},
            {"model", model},
            {"device", device},
            {"num_prompts", o.num_prompts},
            {"dataset", o.dataset},
            {"input_len", o.input_len},
            {"output_len", o.output_len},
            {"range_ratio", o.range_ratio},
            {"elapsed_s", r.elapsed_s},
            {"num_requests", r.num_requests},
            {"total_prompt_tokens", r.num_prompt_tokens},
            {"total_output_tokens", r.num_output_tokens},
            {"requests_per_s", static_cast<double>(r.num_requests) / d},
            {"output_tok_s", static_cast<double>(r.num_output_tokens) / d},
            {"total_tok_s", static_cast<double>(r.num_prompt_tokens + r.num_output_tokens) / d}};
  step_fields(j, r.steps);
  return j;
}

std::string format_throughput_report(const json& j) {
  std::string out = fmt::format("{:=^60}\n", " Throughput (in-process) ");
  line(out, "Model / device:",
       fmt::format("{} / {}", j["model"].get<std::string>(), j["device"].get<std::string>()));
  line(out, "Requests x input -> output tokens:",
       fmt::format("{} x {} -> {} ({})", j["num_prompts"].get<int64_t>(),
                   j["input_len"].get<int64_t>(), j["output_len"].get<int64_t>(),
                   j["dataset"].get<std::string>()));
  line(out, "Elapsed (s):", num(j, "elapsed_s"));
  line(out, "Requests/s:", num(j, "requests_per_s"));
  line(out, "Output tokens/s:", num(j, "output_tok_s"));
  line(out, "Total tokens/s:", num(j, "total_tok_s"));
  step_lines(out, j);
  return out + std::string(60, '=') + "\n";
}

}  // namespace pagoda::bench
