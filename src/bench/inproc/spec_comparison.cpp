#include "bench/inproc/spec_comparison.h"

#include <fmt/format.h>

#include "bench/inproc/inproc_report.h"

namespace pagoda::bench {

namespace {

using nlohmann::json;

json ratio(const json& a, const json& b) {
  if (!a.is_number() || !b.is_number() || b.get<double>() <= 0) return nullptr;
  return a.get<double>() / b.get<double>();
}

std::string num(const json& j, const char* key, const char* spec = "{:.2f}") {
  const json& v = j.contains(key) ? j[key] : json(nullptr);
  return v.is_number() ? fmt::format(fmt::runtime(spec), v.get<double>()) : "n/a";
}

}  // namespace

json spec_comparison(const std::string& proposer, int k, json baseline, json speculative,
                     bool same_outputs) {
  json j = {{"bench", "latency"}, {"proposer", proposer}, {"num_speculative_tokens", k}};
  j["tpot_speedup"] = ratio(baseline["tpot_mean_ms"], speculative["tpot_mean_ms"]);
  j["output_tok_s_speedup"] = ratio(speculative["output_tok_s"], baseline["output_tok_s"]);
  j["step_ratio"] = ratio(speculative["num_steps"], baseline["num_steps"]);
  j["same_outputs"] = same_outputs;
  j["baseline"] = std::move(baseline);
  j["speculative"] = std::move(speculative);
  return j;
}

std::string format_spec_comparison(const json& j) {
  const json& b = j["baseline"];
  const json& s = j["speculative"];
  std::string out = "Without speculation:\n" + format_latency_report(b) +
                    fmt::format("With the {} proposer, k = {}:\n", j["proposer"].get<std::string>(),
                                j["num_speculative_tokens"].get<int>()) +
                    format_latency_report(s);
  out += fmt::format("{:=^60}\n", " Speculation vs none ");
  auto row = [&](const std::string& label, const std::string& a, const std::string& c) {
    out += fmt::format("{:<36} {:>10} {:>12}\n", label, a, c);
  };
  row("", "baseline", j["proposer"].get<std::string>());
  row("TPOT mean (ms)", num(b, "tpot_mean_ms", "{:.3f}"), num(s, "tpot_mean_ms", "{:.3f}"));
  row("Decode tok/s", num(b, "decode_tok_s"), num(s, "decode_tok_s"));
  row("Output tok/s (E2E)", num(b, "output_tok_s"), num(s, "output_tok_s"));
  row("Engine steps", num(b, "num_steps", "{:.0f}"), num(s, "num_steps", "{:.0f}"));
  row("Mean accepted length", "-", num(s, "spec_mean_accepted_length", "{:.3f}"));
  row("Acceptance rate", "-", num(s, "spec_acceptance_rate", "{:.3f}"));
  out += fmt::format("{:<36} {}\n", "Speedup: TPOT / output tok/s:",
                     fmt::format("{} / {}", num(j, "tpot_speedup", "{:.3f}x"),
                                 num(j, "output_tok_s_speedup", "{:.3f}x")));
  out += fmt::format("{:<36} {}\n", "Steps with / without:", num(j, "step_ratio", "{:.3f}"));
  out += fmt::format("{:<36} {}\n",
                     "Same greedy outputs:", j["same_outputs"].get<bool>() ? "yes" : "NO");
  return out + std::string(60, '=') + "\n";
}

}  // namespace pagoda::bench
