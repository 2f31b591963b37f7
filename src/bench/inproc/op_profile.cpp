#include "bench/inproc/op_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "bench/inproc/engine_bench.h"

namespace pagoda::bench {

namespace {

using nlohmann::json;

struct Totals {
  int64_t calls = 0;
  double us = 0.0;
  double bytes = 0.0;
};

}  // namespace

std::unordered_map<const void*, std::string> linear_weight_names(const ModelWeights& w) {
  std::unordered_map<const void*, std::string> names;
  auto add = [&](const Tensor& t, const char* name) {
    if (!t.empty()) names.emplace(t.data, name);
  };
  for (const LayerWeights& l : w.layers) {
    add(l.qkv, "qkv");
    add(l.o_proj, "o_proj");
    add(l.gate_up, "gate_up");
    add(l.down, "down");
    add(l.router, "router");
    add(l.shared_gate_up, "shared_gate_up");
    add(l.shared_down, "shared_down");
    add(l.shared_gate, "shared_gate");
  }
  add(w.lm_head, "lm_head");
  return names;
}

Result<OpProfile> summarize_op_profile(const ProfileTrace& trace, int64_t batch_size,
                                       int num_steps) {
  std::vector<int64_t> decode;
  for (size_t s = 0; s < trace.steps.size(); ++s)
    if (trace.steps[s].num_tokens == batch_size && trace.steps[s].max_query_len == 1)
      decode.push_back(static_cast<int64_t>(s));
  if (num_steps < 1 || static_cast<int64_t>(decode.size()) < num_steps)
    return make_error(ErrorCode::kInternal,
                      fmt::format("op profile: {} decode steps of {} rows recorded, {} wanted",
                                  decode.size(), batch_size, num_steps));
  decode.erase(decode.begin(), decode.end() - num_steps);
  std::map<std::string, Totals> by_label;
  for (const ProfiledOp& op : trace.ops) {
    if (!std::binary_search(decode.begin(), decode.end(), op.step)) continue;
    Totals& t = by_label[op.label];
    ++t.calls;
    t.us += op.us;
    t.bytes += static_cast<double>(op.bytes);
  }
  OpProfile out;
  out.num_steps = num_steps;
  out.batch_size = batch_size;
  out.method = trace.method;
  const double n = num_steps;
  for (const auto& [label, t] : by_label) {
    const double calls = static_cast<double>(t.calls);
    out.records.push_back({label, calls / n, t.us / n, t.us / calls, t.bytes / calls});
    out.sum_us_per_step += t.us / n;
  }
  std::sort(out.records.begin(), out.records.end(),
            [](const auto& a, const auto& b) { return a.us_per_step > b.us_per_step; });
  return out;
}

Result<OpProfile> run_op_profile(LlmEngine& engine, ModelRunner& runner,
                                 ProfilingBackend& profiler, const OpProfileOptions& o) {
  const int64_t vocab = engine.info().vocab_size;
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.batch_size));
  uint64_t x = o.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (auto& p : prompts)
    for (int64_t i = 0; i < o.context_len; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64: fresh ids, no prefix hits
      p.push_back(static_cast<int32_t>(x % static_cast<uint64_t>(std::max<int64_t>(vocab, 1))));
    }
  const std::vector<int64_t> lens(prompts.size(), profile_output_len(o));
  profiler.set_weight_names(linear_weight_names(runner.weights()));
  engine.wait_idle();
  runner.pause_graphs(true);
  profiler.start();
  auto ran = run_engine_batch(engine, prompts, lens, "profile-");
  engine.wait_idle();
  ProfileTrace trace = profiler.stop();
  runner.pause_graphs(false);
  if (!ran.ok()) return ran.error();
  PAGODA_ASSIGN_OR_RETURN(OpProfile profile,
                          summarize_op_profile(trace, o.batch_size, o.num_steps));
  profile.context_len = o.context_len + 1;
  return profile;
}

void add_op_profile(json& report, const OpProfile& p, double timed_step_us,
                    const std::optional<BandwidthCeiling>& ceiling) {
  json records = json::array();
  for (const OpProfileRecord& r : p.records) {
    json j = {{"op", r.op},
              {"calls_per_step", r.calls_per_step},
              {"us_per_step", r.us_per_step},
              {"us_per_call", r.us_per_call},
              {"bytes_per_call", r.bytes_per_call > 0 ? json(r.bytes_per_call) : json(nullptr)},
              {"gbps", nullptr},
              {"pct_of_ceiling", nullptr}};
    if (r.bytes_per_call > 0 && r.us_per_call > 0) {
      const double gbps = r.bytes_per_call / r.us_per_call / 1e3;
      j["gbps"] = gbps;
      if (ceiling) j["pct_of_ceiling"] = 100.0 * gbps * 1e9 / ceiling->bytes_per_s;
    }
    records.push_back(std::move(j));
  }
  report["op_profile"] = std::move(records);
  report["op_profile_summary"] = {{"num_steps", p.num_steps},
                                  {"batch_size", p.batch_size},
                                  {"context_len", p.context_len},
                                  {"method", p.method},
                                  {"sum_us_per_step", p.sum_us_per_step},
                                  {"timed_step_us", timed_step_us},
                                  {"gap_us", timed_step_us - p.sum_us_per_step}};
}

std::string format_op_profile(const json& report) {
  const json& s = report["op_profile_summary"];
  std::string out = fmt::format("{:=^104}\n", " Decode step by op (eager, device time) ");
  out += fmt::format("{} steps of batch {} at context {}; {}\n", s["num_steps"].get<int>(),
                     s["batch_size"].get<int64_t>(), s["context_len"].get<int64_t>(),
                     s["method"].get<std::string>());
  out += fmt::format("{:<44} {:>6} {:>10} {:>9} {:>9} {:>8} {:>6}\n", "op", "calls", "us/step",
                     "us/call", "MB/call", "GB/s", "%ceil");
  auto opt = [](const json& v, const char* f, double scale) {
    return v.is_null() ? std::string("-") : fmt::format(fmt::runtime(f), v.get<double>() * scale);
  };
  for (const json& r : report["op_profile"]) {
    out += fmt::format("{:<44} {:>6.1f} {:>10.1f} {:>9.2f} {:>9} {:>8} {:>6}\n",
                       r["op"].get<std::string>(), r["calls_per_step"].get<double>(),
                       r["us_per_step"].get<double>(), r["us_per_call"].get<double>(),
                       opt(r["bytes_per_call"], "{:.3f}", 1e-6), opt(r["gbps"], "{:.0f}", 1.0),
                       opt(r["pct_of_ceiling"], "{:.1f}", 1.0));
  }
  out += fmt::format("{:<44} {:>17.1f}\n", "sum of ops (us/step)",
                     s["sum_us_per_step"].get<double>());
  out += fmt::format("{:<44} {:>17.1f}\n", "timed step, mean TPOT (us)",
                     s["timed_step_us"].get<double>());
  out += fmt::format("{:<44} {:>17.1f}\n", "not in any op (us/step)", s["gap_us"].get<double>());
  return out + std::string(104, '=') + "\n";
}

}  // namespace pagoda::bench
