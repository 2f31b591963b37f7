// pagoda bench serve | latency | throughput: the serving benchmark against an
// OpenAI-compatible server, and the in-process engine benches
// (docs/benchmarks.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_constraint.h"
#include "bench/serve_bench.h"
#include "core/result.h"
#include "pagoda/command.h"
#include "pagoda/model_flags.h"
#ifdef PAGODA_HAVE_BENCH_INPROC
#include <fstream>

#include "bench/inproc/engine_bench.h"
#include "bench/inproc/inproc_report.h"
#include "bench/inproc/model_cost.h"
#include "bench/inproc/op_profile.h"
#include "bench/inproc/spec_comparison.h"
#include "bench/inproc/stored_weight_bytes.h"
#include "bench/inproc/w7_editing.h"
#include "bench/package_source.h"
#include "engine/backend_factory.h"
#include "engine/engine_api.h"
#include "engine/llm_engine.h"
#include "io/model_description.h"
#include "io/model_files.h"
#include "model/model_runner.h"
#include "pagoda/engine_flags.h"
#include "spec/random_proposer.h"
#include "spec/replay_proposer.h"
#endif

namespace {

using pagoda::Error;
using pagoda::ErrorCode;
using pagoda::Result;
using pagoda::Status;
using pagoda::bench::DatasetKind;
using pagoda::bench::ServeBenchOptions;

Result<double> parse_rate(const std::string& s) {
  if (s == "inf" || s == "Inf" || s == "INF") return std::numeric_limits<double>::infinity();
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size() && v > 0.0) return v;
  } catch (const std::exception&) {
  }
  return pagoda::make_error(ErrorCode::kInvalidArgument,
                            "bad request rate '" + s + "': expected a number > 0 or 'inf'");
}

Result<std::vector<double>> parse_rates(const std::string& list) {
  std::vector<double> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    PAGODA_ASSIGN_OR_RETURN(double r, parse_rate(item));
    out.push_back(r);
  }
  if (out.empty()) return pagoda::make_error(ErrorCode::kInvalidArgument, "--sweep-rates is empty");
  return out;
}

// "ttft:200" "tpot:50" "e2el:2000" (milliseconds) into the SLO config.
Status parse_goodput(const std::vector<std::string>& pairs, pagoda::bench::SloConfig& slo) {
  for (const auto& p : pairs) {
    auto colon = p.find(':');
    std::string key = p.substr(0, colon);
    double ms = -1.0;
    try {
      if (colon != std::string::npos) ms = std::stod(p.substr(colon + 1));
    } catch (const std::exception&) {
    }
    if (colon == std::string::npos || ms < 0.0)
      return pagoda::make_error(
          ErrorCode::kInvalidArgument,
          "bad --goodput entry '" + p + "': expected KEY:MILLISECONDS with KEY ttft, tpot or e2el");
    if (key == "ttft")
      slo.ttft_ms = ms;
    else if (key == "tpot")
      slo.tpot_ms = ms;
    else if (key == "e2el")
      slo.e2el_ms = ms;
    else
      return pagoda::make_error(ErrorCode::kInvalidArgument,
                                "bad --goodput metric '" + key + "': expected ttft, tpot or e2el");
  }
  return Status::Ok();
}

struct ServeFlags {
  ServeBenchOptions o;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string dataset = "random";
  std::string rate = "inf";
  std::string sweep;
  std::vector<std::string> goodput;
  std::string percentiles = "90,99";
  bool no_ignore_eos = false;
  bool no_progress = false;
  std::string response_format_schema;
  std::string structured_output;
};

// --response-format-schema FILE / --structured-output json_object (the same
// flags on serve, latency and throughput).
void add_constraint_flags(CLI::App* cmd, std::string& schema_file, std::string& kind) {
  cmd->add_option("--response-format-schema", schema_file, pagoda::bench::kResponseFormatSchemaHelp)
      ->type_name("FILE");
  cmd->add_option("--structured-output", kind, pagoda::bench::kStructuredOutputHelp)
      ->type_name("json_object|none");
}

void add_serve_flags(CLI::App* cmd, ServeFlags& f) {
  auto& o = f.o;
  cmd->add_option("--base-url", o.base_url,
                  "server URL, http://HOST:PORT[/prefix] (default: from --host and --port)");
  cmd->add_option("--host", f.host, "server host when --base-url is not given")
      ->capture_default_str();
  cmd->add_option("--port", f.port, "server port when --base-url is not given")
      ->capture_default_str();
  cmd->add_option("--endpoint", o.endpoint, "API path: /v1/completions or /v1/chat/completions")
      ->capture_default_str();
  cmd->add_option("--model", o.model,
                  "model name sent in requests (default: the first of GET /v1/models)");
  cmd->add_option("--api-key", o.api_key, "bearer token (default: $OPENAI_API_KEY)");
  cmd->add_option("--dataset,--dataset-name", f.dataset,
                  "random: random token ids of exact lengths; sharegpt: a ShareGPT JSON "
                  "(--dataset-path) or, "
                  "without one, ShareGPT-like log-normal lengths (mean ~220 in / ~190 out); "
                  "prefix: a shared "
                  "prefix of --prefix-len tokens + a unique suffix")
      ->check(CLI::IsMember({"random", "sharegpt", "prefix"}))
      ->capture_default_str();
  cmd->add_option("--dataset-path", o.dataset_path,
                  "ShareGPT-format JSON file for --dataset sharegpt");
  cmd->add_option("--num-prompts", o.num_prompts, "number of requests")->capture_default_str();
  cmd->add_option("--input-len,--random-input-len", o.input_len,
                  "prompt tokens (random: 1024; prefix: unique suffix, 128)");
  cmd->add_option(
      "--output-len,--random-output-len", o.output_len,
      "max_tokens of every request (random: 128, prefix: 128; sharegpt: overrides the dataset's)");
  cmd->add_option("--range-ratio,--random-range-ratio", o.range_ratio,
                  "lengths uniform in [L*(1-X), L*(1+X)], X in [0, 1)")
      ->capture_default_str();
  cmd->add_option("--prefix-len,--random-prefix-len", o.prefix_len,
                  "shared prefix tokens before every prompt (prefix dataset: 2048)");
  cmd->add_option("--vocab-size", o.vocab_size,
                  "draw random token ids from [0, N) (default: ids of a sample text tokenized by "
                  "the server's /tokenize)");
  cmd->add_option("--request-rate", f.rate, "requests per second, or inf to send all at once")
      ->capture_default_str();
  cmd->add_option("--burstiness", o.burstiness,
                  "gamma shape of inter-arrival times: 1 = Poisson, < 1 burstier, > 1 more regular")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", o.max_concurrency,
                  "at most this many requests in flight (0: unbounded)")
      ->capture_default_str();
  cmd->add_option("--sweep-rates", f.sweep,
                  "comma-separated request rates (e.g. 1,4,16,inf): one run per rate");
  cmd->add_option("--goodput", f.goodput,
                  "SLOs in ms as KEY:VALUE pairs (ttft, tpot, e2el), e.g. ttft:200 tpot:50")
      ->expected(1, 3);
  cmd->add_option("--metric-percentiles", f.percentiles, "comma-separated percentiles to report")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "seed of the dataset and of the arrival times")
      ->capture_default_str();
  cmd->add_flag("--no-ignore-eos", f.no_ignore_eos,
                "let requests stop at EOS (default: ignore_eos, so output lengths are exact)");
  add_constraint_flags(cmd, f.response_format_schema, f.structured_output);
  cmd->add_option("--result-json", o.result_json,
                  "write the results (vLLM's field names) to this JSON file");
  cmd->add_option("--plots", o.plots_dir,
                  "write PNG plots (latency CDFs; with --sweep-rates, throughput and latency "
                  "against rate) here");
  cmd->add_option("--ready-check-timeout-sec", o.ready_timeout_s,
                  "retry the initial test request for this long (0: no test request)")
      ->capture_default_str();
  cmd->add_option("--request-timeout", o.request_timeout_s, "seconds before one request is failed")
      ->capture_default_str();
  cmd->add_flag("--disable-tqdm,--no-progress", f.no_progress, "no progress bar");
}

Status finish_serve_flags(CLI::App* cmd, ServeFlags& f) {
  auto& o = f.o;
  if (cmd->count("--base-url") == 0) o.base_url = "http://" + f.host + ":" + std::to_string(f.port);
  if (f.dataset == "sharegpt") o.dataset = DatasetKind::kShareGpt;
  if (f.dataset == "prefix") {
    o.dataset = DatasetKind::kPrefix;
    if (cmd->count("--input-len") == 0) o.input_len = 128;
    if (cmd->count("--prefix-len") == 0) o.prefix_len = 2048;
  }
  o.output_len_set = cmd->count("--output-len") > 0;
  if (!o.dataset_path.empty() && o.dataset != DatasetKind::kShareGpt)
    return pagoda::make_error(ErrorCode::kInvalidArgument,
                              "--dataset-path needs --dataset sharegpt");
  PAGODA_ASSIGN_OR_RETURN(o.request_rate, parse_rate(f.rate));
  if (!f.sweep.empty()) {
    PAGODA_ASSIGN_OR_RETURN(o.sweep_rates, parse_rates(f.sweep));
  }
  PAGODA_RETURN_IF_ERROR(parse_goodput(f.goodput, o.slo));
  o.percentiles.clear();
  std::stringstream ss(f.percentiles);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      double p = std::stod(item);
      if (p < 0.0 || p > 100.0) throw std::out_of_range("percentile");
      o.percentiles.push_back(p);
    } catch (const std::exception&) {
      return pagoda::make_error(ErrorCode::kInvalidArgument,
                                "bad --metric-percentiles entry '" + item + "'");
    }
  }
  o.ignore_eos = !f.no_ignore_eos;
  o.progress = !f.no_progress;
  PAGODA_ASSIGN_OR_RETURN(
      o.constraint, pagoda::bench::bench_constraint(f.response_format_schema, f.structured_output));
  return Status::Ok();
}

#ifdef PAGODA_HAVE_BENCH_INPROC
// ---- in-process benches ------------------------------------------------------

struct InprocFlags {
  pagoda::EngineOptions engine;
  pagoda::bench::LatencyBenchOptions latency;
  pagoda::bench::ThroughputBenchOptions throughput;
  double ceiling_gbps = 0.0;    // 0: measure before the engine starts
  double ceiling_tflops = 0.0;  // 0: no prefill ratio
  std::string result_json;
  std::string response_format_schema;
  std::string structured_output;
  std::string dataset = "random";             // random | w7
  std::vector<std::string> w7_site_packages;  // empty: python3's sys.path
  int spec_replay = 0;                        // --speculative-replay K
  int spec_random = 0;                        // --speculative-random K
  int spec_replay_forced = 0;                 // --speculative-replay-forced K
  bool profile_ops = false;                   // --profile-ops
  int profile_ops_steps = 3;                  // --profile-ops-steps N
  CLI::App* latency_cmd = nullptr;
  CLI::App* throughput_cmd = nullptr;
};

// The model positional and the shared engine flags (vLLM names).
void add_engine_flags(CLI::App* cmd, pagoda::EngineOptions& e) {
  cmd->add_option("model", e.model, pagoda::app::kModelHelp)
      ->required();
  pagoda::app::add_engine_flags(*cmd, e);
}

void add_ceiling_flags(CLI::App* cmd, InprocFlags& f) {
  cmd->add_option(
      "--ceiling-gbps", f.ceiling_gbps,
      "memory bandwidth ceiling in GB/s (read + written) measured elsewhere; default: measured "
      "before the engine starts (a 1 GiB device-to-device copy on cuda, a threaded memcpy on cpu)");
  cmd->add_option("--ceiling-tflops", f.ceiling_tflops,
                  "bf16 matrix rate ceiling in TFLOP/s (prefill ratio)");
  cmd->add_option("--result-json", f.result_json, "write the results to this JSON file");
  add_constraint_flags(cmd, f.response_format_schema, f.structured_output);
}

// --dataset and W7's source (latency and throughput).
void add_dataset_flags(CLI::App* cmd, InprocFlags& f) {
  const pagoda::bench::PackageFile w7 = pagoda::bench::w7_source();
  cmd->add_option("--dataset,--dataset-name", f.dataset,
                  "random: random token ids of exactly --input-len; w7: input-grounded editing "
                  "(bench/README.md): as many whole lines of " +
                      w7.package + " " + w7.version + "'s " + w7.path +
                      " (read from the installed package, from its first definition) as fit "
                      "--input-len tokens, with an "
                      "instruction to reproduce them renaming one name (through the chat "
                      "template when the model has one); use --input-len 2048 --output-len 1024")
      ->check(CLI::IsMember({"random", "w7"}))
      ->capture_default_str();
  cmd->add_option("--w7-site-packages", f.w7_site_packages,
                  "folders to look for " + w7.package + " " + w7.version +
                      " in (its *.dist-info gives the version; another version is refused); "
                      "default: python3's sys.path")
      ->type_name("DIR");
}

void add_inproc_commands(CLI::App& app, InprocFlags& f) {
  f.latency_cmd =
      app.add_subcommand("latency",
                         "W1: batch latency in-process: TTFT, TPOT and decode GB/s against "
                         "the bandwidth ceiling (speed of light)");
  add_engine_flags(f.latency_cmd, f.engine);
  auto& l = f.latency;
  f.latency_cmd->add_option("--input-len", l.input_len, "prompt tokens")->capture_default_str();
  f.latency_cmd->add_option("--output-len", l.output_len, "generated tokens")
      ->capture_default_str();
  f.latency_cmd->add_option("--batch-size", l.batch_size, "requests per iteration")
      ->capture_default_str();
  f.latency_cmd->add_option("--num-iters", l.num_iters, "timed iterations")->capture_default_str();
  f.latency_cmd->add_option("--num-iters-warmup,--warmup", l.num_warmup, "untimed iterations first")
      ->capture_default_str();
  add_ceiling_flags(f.latency_cmd, f);
  add_dataset_flags(f.latency_cmd, f);
  auto* replay = f.latency_cmd->add_option(
      "--speculative-replay", f.spec_replay,
      "run the workload without speculation, record every prompt's greedy output, then run it "
      "again (a fresh engine) with a replay proposer drafting K tokens of that output (every "
      "draft accepted: the mechanics of verification at full acceptance), and report both runs "
      "side by side (TPOT, tok/s, speedup, acceptance; fails when a greedy output differs); not "
      "with --speculative-config or structured output");
  replay->check(CLI::Range(1, 64))->type_name("K");
  f.latency_cmd
      ->add_option("--speculative-random", f.spec_random,
                   "like --speculative-replay, with K random token ids drafted per step "
                   "(nothing accepted: the cost of speculation)")
      ->check(CLI::Range(1, 64))
      ->type_name("K")
      ->excludes(replay);
  auto* forced =
      f.latency_cmd->add_option(
                  "--speculative-replay-forced", f.spec_replay_forced,
                  "like --speculative-replay, but the drafts follow the recording by position and "
                  "every draft is kept whatever the target samples: verification at full "
                  "acceptance where the target's greedy output is not reproducible across step "
                  "shapes (bf16 near-ties, e.g. random weights on a GPU); the outputs are then not "
                  "the target's, so they are compared but a difference does not fail")
          ->check(CLI::Range(1, 64))
          ->type_name("K")
          ->excludes(replay);
  forced->excludes(f.latency_cmd->get_option("--speculative-random"));
  f.latency_cmd->add_flag(
      "--profile-ops", f.profile_ops,
      "after the timed iterations, run one more batch eagerly (no CUDA graphs) with every backend "
      "op timed on the device (cuda: an event pair around each op, the host kept ahead by a spin "
      "kernel every 64 ops; cpu: the host clock) and print where a decode step's time goes: per "
      "op (linears by weight name and shape) calls, us per step and per call, and for linears, "
      "attention and MoE experts the bytes moved and GB/s against the ceiling; the sum of the "
      "ops is set against the timed TPOT (the difference: launch gaps and host work that graphs "
      "hide); into --result-json as op_profile and op_profile_summary; one device only");
  f.latency_cmd
      ->add_option("--profile-ops-steps", f.profile_ops_steps,
                   "decode steps --profile-ops averages over (at context input-len + "
                   "(output-len - 1) / 2)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  f.throughput_cmd = app.add_subcommand("throughput",
                                        "W2/W6: offline throughput in-process: every request added "
                                        "at once; output tok/s, total tok/s, req/s");
  add_engine_flags(f.throughput_cmd, f.engine);
  auto& t = f.throughput;
  f.throughput_cmd->add_option("--num-prompts", t.num_prompts, "requests")->capture_default_str();
  f.throughput_cmd->add_option("--input-len", t.input_len, "prompt tokens")->capture_default_str();
  f.throughput_cmd->add_option("--output-len", t.output_len, "generated tokens")
      ->capture_default_str();
  f.throughput_cmd
      ->add_option("--range-ratio", t.range_ratio, "lengths uniform in [L*(1-X), L*(1+X)]")
      ->capture_default_str();
  f.throughput_cmd->add_option("--result-json", f.result_json,
                               "write the results to this JSON file");
  add_constraint_flags(f.throughput_cmd, f.response_format_schema, f.structured_output);
  add_dataset_flags(f.throughput_cmd, f);
}

// W7's source text ("" for --dataset random), read before any engine starts.
Result<std::string> dataset_source(const InprocFlags& f) {
  if (f.dataset != "w7") return std::string();
  std::vector<std::string> dirs = f.w7_site_packages;
  if (dirs.empty()) {
    PAGODA_ASSIGN_OR_RETURN(dirs, pagoda::bench::python_path_dirs());
  }
  return pagoda::bench::read_package_file(pagoda::bench::w7_source(), dirs);
}

// The dataset's prompts for `engine` (null for random): W7 through its
// tokenizer and chat template, held by the returned maker.
Result<pagoda::bench::PromptMaker> dataset_prompts(const InprocFlags& f, const std::string& source,
                                                   const pagoda::Engine& engine,
                                                   int64_t input_len) {
  if (f.dataset != "w7") return pagoda::bench::PromptMaker{};
  pagoda::bench::ChatRenderer chat;
  if (engine.has_chat_template())
    chat = [&engine](const pagoda::ChatTemplateInputs& in) {
      return engine.apply_chat_template(in);
    };
  PAGODA_ASSIGN_OR_RETURN(
      auto w7, pagoda::bench::W7Prompts::create(source, engine.tokenizer(), chat, input_len));
  std::fprintf(stderr, "W7: lines %lld-%lld of %s (%zu names to rename), %s prompts\n",
               static_cast<long long>(w7.first_line()),
               static_cast<long long>(w7.first_line() + w7.num_lines() - 1),
               pagoda::bench::w7_source().path.c_str(), w7.names().size(),
               chat ? "chat" : "completion");
  auto shared = std::make_shared<const pagoda::bench::W7Prompts>(std::move(w7));
  return pagoda::bench::PromptMaker(
      [shared](int64_t first, int64_t count) { return shared->make(first, count); });
}

Status write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return Status::Ok();
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  out.close();
  if (!out)
    return pagoda::make_error(ErrorCode::kIo, "cannot write --result-json file '" + path + "'");
  return Status::Ok();
}

// The bandwidth ceiling, measured before the engine takes the device memory:
// a device-to-device copy through the backend --device selects (cuda), or a
// threaded memcpy (cpu). Also returns the bytes per weight a decode step
// reads: the compute dtype's, or with FP8 linear layers (an FP8 checkpoint
// or --quantization fp8) one byte for each layer matmul weight and the
// compute dtype's for the rest (norms, lm_head), as one average; the FP8
// scales are not counted (under 0.1% of the bytes). Weights kept in
// quantization blocks (a GGUF file's, an AWQ / GPTQ checkpoint's, unless
// --gguf-dequantize) count their block bytes per parameter as the files
// store them (stored_weight_bytes.h: a fused product the loader dequantizes
// because its parts' formats differ is still counted in blocks); with
// --load-format dummy, the dummy AWQ / GPTQ source's group blocks.
Status measure_ceiling(InprocFlags& f, const pagoda::ModelLocation& location,
                       const pagoda::ModelConfig& config, pagoda::bench::LatencyReportInputs& in) {
  PAGODA_ASSIGN_OR_RETURN(auto backend, pagoda::create_backend(f.engine.device, config));
  double elem = static_cast<double>(pagoda::dtype_size(backend->compute_dtype()));
  in.bytes_per_weight = in.bytes_per_kv_elem = elem;
  const pagoda::bench::ModelCost cost = pagoda::bench::model_cost(config);
  const auto matmul = static_cast<double>(cost.layer_matmul_params);
  const auto head = static_cast<double>(cost.lm_head_params);
  const auto all = static_cast<double>(cost.decode_weight_params);
  if (config.quantization.fp8() || f.engine.quantization == "fp8") {
    if (all > 0) in.bytes_per_weight = (matmul + (all - matmul) * elem) / all;
  } else if (!f.engine.gguf_dequantize && all > 0) {
    PAGODA_ASSIGN_OR_RETURN(
        const auto stored,
        pagoda::bench::stored_weight_bytes_of(location, f.engine.load_format, elem));
    if (stored)
      in.bytes_per_weight =
          (matmul * stored->matmul + head * stored->head + (all - matmul - head) * elem) / all;
  }
  if (f.ceiling_gbps > 0) {
    in.bandwidth = pagoda::bench::BandwidthCeiling{f.ceiling_gbps * 1e9, "given by --ceiling-gbps"};
  } else if (backend->kind() == pagoda::DeviceKind::kCuda) {
    PAGODA_ASSIGN_OR_RETURN(in.bandwidth, pagoda::bench::measure_backend_bandwidth(*backend));
  } else {
    PAGODA_ASSIGN_OR_RETURN(in.bandwidth, pagoda::bench::measure_host_bandwidth());
  }
  return Status::Ok();
}

// What --profile-ops needs of a started engine (engine/llm_engine.h's parts).
struct OpProfiling {
  pagoda::LlmEngine* engine = nullptr;
  pagoda::ModelRunner* runner = nullptr;
  pagoda::ProfilingBackend* backend = nullptr;
};

// --profile-ops after the timed iterations: the decode steps' per-op table
// into `report` (op_profile.h).
Status add_op_profile(const InprocFlags& f, const OpProfiling& p,
                      const pagoda::bench::LatencyReportInputs& in, nlohmann::json& report) {
  const auto& l = f.latency;
  pagoda::bench::OpProfileOptions o;
  o.num_steps = f.profile_ops_steps;
  o.batch_size = l.batch_size;
  // The timed run's mean decode context, the profile's sequences ending
  // within the timed run's longest (input + output, which fits max_model_len).
  const int64_t mean_context = l.input_len + (l.output_len - 1) / 2;
  const int64_t chunk = std::max<int64_t>(f.engine.max_num_batched_tokens, 1);
  o.prefill_steps = (l.batch_size * mean_context + chunk - 1) / chunk;
  o.context_len = std::max<int64_t>(
      1, std::min(mean_context, l.input_len + l.output_len - pagoda::bench::profile_output_len(o)));
  o.seed = l.seed + 1000003;
  PAGODA_ASSIGN_OR_RETURN(auto profile,
                          pagoda::bench::run_op_profile(*p.engine, *p.runner, *p.backend, o));
  pagoda::bench::add_op_profile(report, profile, report["tpot_mean_ms"].get<double>() * 1000.0,
                                in.bandwidth);
  return Status::Ok();
}

// One latency run on `engine`: its report (and recordings when asked), with
// --profile-ops's table when `profiling` is given.
Result<nlohmann::json> latency_run(const InprocFlags& f, pagoda::Engine& engine,
                                   const std::string& source, pagoda::bench::LatencyReportInputs in,
                                   std::vector<pagoda::bench::Recording>* recordings,
                                   const OpProfiling* profiling = nullptr) {
  pagoda::bench::LatencyBenchOptions options = f.latency;
  options.dataset = f.dataset;
  options.record_outputs = recordings != nullptr;
  PAGODA_ASSIGN_OR_RETURN(options.prompts, dataset_prompts(f, source, engine, options.input_len));
  auto result = pagoda::bench::run_latency_bench(engine, options);
  if (!result.ok()) {
    engine.drain();
    return result.error();
  }
  if (recordings) *recordings = std::move(result.value().recordings);
  in.options = options;
  in.result = std::move(result).value();
  in.device = engine.info().device;
  in.model = engine.info().served_model_name;
  nlohmann::json report = pagoda::bench::latency_report(in);
  Status profiled = profiling ? add_op_profile(f, *profiling, in, report) : Status::Ok();
  engine.drain();
  if (!profiled.ok()) return profiled.error();
  return report;
}

// The latency run on a fresh engine; with --profile-ops its backend is a
// ProfilingBackend and the run ends with the op profile.
Result<nlohmann::json> latency_run_fresh(InprocFlags& f, const std::string& source,
                                         const pagoda::bench::LatencyReportInputs& in,
                                         std::vector<pagoda::bench::Recording>* recordings) {
  if (!f.profile_ops) {
    PAGODA_ASSIGN_OR_RETURN(auto engine, pagoda::create_engine(f.engine));
    return latency_run(f, *engine, source, in, recordings);
  }
  pagoda::EngineOptions options = f.engine;
  options.profile_ops = true;
  PAGODA_ASSIGN_OR_RETURN(auto parts, pagoda::load_engine_parts(options));
  OpProfiling p;
  p.runner = dynamic_cast<pagoda::ModelRunner*>(parts.runner.get());
  p.backend = dynamic_cast<pagoda::ProfilingBackend*>(parts.backend.get());
  if (p.runner == nullptr || p.backend == nullptr)
    return pagoda::make_error(ErrorCode::kInternal, "--profile-ops: the engine has no profiled runner");
  PAGODA_ASSIGN_OR_RETURN(auto engine, pagoda::LlmEngine::start(std::move(parts)));
  p.engine = engine.get();
  return latency_run(f, *engine, source, in, recordings, &p);
}

// --speculative-replay / --speculative-random: the second run, with the
// benchmark proposer put into the engine's parts.
Status run_speculative_comparison(const InprocFlags& f, const std::string& source,
                                  const pagoda::bench::LatencyReportInputs& in,
                                  nlohmann::json baseline,
                                  const std::vector<pagoda::bench::Recording>& recorded) {
  const bool forced = f.spec_replay_forced > 0;
  const bool replay = f.spec_replay > 0 || forced;
  const int k = forced ? f.spec_replay_forced : replay ? f.spec_replay : f.spec_random;
  const std::string method = forced ? "replay-forced" : replay ? "replay" : "random";
  // k before the runner is created: it captures the verification graphs.
  pagoda::EngineOptions options = f.engine;
  options.speculative.num_speculative_tokens = k;
  PAGODA_ASSIGN_OR_RETURN(auto parts, pagoda::load_engine_parts(options));
  parts.info.speculative_method = method;
  parts.info.num_speculative_tokens = k;
  if (replay) {
    auto proposer = std::make_unique<pagoda::ReplayProposer>();
    for (const auto& r : recorded) proposer->record(r.prompt, r.output);
    if (forced) {
      proposer->follow_positions();
      parts.acceptance_rule = [](std::span<const int32_t>, std::span<const int32_t> drafts) {
        return static_cast<int32_t>(drafts.size());
      };
    }
    parts.proposer = std::move(proposer);
  } else {
    parts.proposer = std::make_unique<pagoda::RandomProposer>(
        static_cast<int32_t>(parts.info.vocab_size), f.latency.seed + 1);
  }
  PAGODA_ASSIGN_OR_RETURN(auto engine, pagoda::LlmEngine::start(std::move(parts)));
  std::vector<pagoda::bench::Recording> again;
  PAGODA_ASSIGN_OR_RETURN(auto speculative, latency_run(f, *engine, source, in, &again));
  engine.reset();
  bool same = again.size() == recorded.size();
  for (size_t i = 0; same && i < again.size(); ++i)
    same = again[i].prompt == recorded[i].prompt && again[i].output == recorded[i].output;
  auto report = pagoda::bench::spec_comparison(method, k, std::move(baseline),
                                               std::move(speculative), same);
  std::printf("%s", pagoda::bench::format_spec_comparison(report).c_str());
  PAGODA_RETURN_IF_ERROR(write_json(f.result_json, report));
  if (!same && !forced)
    return pagoda::make_error(ErrorCode::kInternal,
                              "the greedy outputs with speculation differ from those without it");
  return Status::Ok();
}

Status run_latency(InprocFlags& f) {
  PAGODA_ASSIGN_OR_RETURN(f.latency.constraint, pagoda::bench::bench_constraint(
                                                    f.response_format_schema, f.structured_output));
  const bool compare = f.spec_replay > 0 || f.spec_random > 0 || f.spec_replay_forced > 0;
  if (compare && f.engine.speculative.enabled())
    return pagoda::make_error(ErrorCode::kInvalidArgument,
                              "--speculative-replay(-forced) and --speculative-random bring their own "
                              "proposer: drop --speculative-config");
  if (compare && f.latency.constraint)
    return pagoda::make_error(ErrorCode::kInvalidArgument,
                              "--speculative-replay(-forced) and --speculative-random cannot be combined "
                              "with structured output: constrained requests are not drafted");
  PAGODA_ASSIGN_OR_RETURN(std::string source, dataset_source(f));
  PAGODA_ASSIGN_OR_RETURN(auto location, pagoda::resolve_model(
                              f.engine.model, pagoda::app::hub_options(f.engine.revision, f.engine.download_dir)));
  // Only the config: the engine loads the weights (as --load-format says).
  PAGODA_ASSIGN_OR_RETURN(auto model, pagoda::describe_model(location));
  pagoda::bench::LatencyReportInputs in;
  PAGODA_RETURN_IF_ERROR(measure_ceiling(f, location, model.config, in));
  in.cost = pagoda::bench::model_cost(model.config);
  in.tensor_parallel_size = f.engine.tensor_parallel_size;
  in.pipeline_parallel_size = f.engine.pipeline_parallel_size;
  in.matrix_flops_per_s = f.ceiling_tflops * 1e12;
  if (compare && f.profile_ops)
    return pagoda::make_error(ErrorCode::kInvalidArgument,
                              "--profile-ops profiles one run: drop the speculation comparison");
  std::vector<pagoda::bench::Recording> recorded;
  // The engine's memory is free (latency_run_fresh returned) before a second one starts.
  PAGODA_ASSIGN_OR_RETURN(nlohmann::json report,
                          latency_run_fresh(f, source, in, compare ? &recorded : nullptr));
  if (compare) return run_speculative_comparison(f, source, in, std::move(report), recorded);
  std::printf("%s", pagoda::bench::format_latency_report(report).c_str());
  if (report.contains("op_profile"))
    std::printf("%s", pagoda::bench::format_op_profile(report).c_str());
  return write_json(f.result_json, report);
}

Status run_throughput(InprocFlags& f) {
  PAGODA_ASSIGN_OR_RETURN(
      f.throughput.constraint,
      pagoda::bench::bench_constraint(f.response_format_schema, f.structured_output));
  PAGODA_ASSIGN_OR_RETURN(std::string source, dataset_source(f));
  PAGODA_ASSIGN_OR_RETURN(auto engine, pagoda::create_engine(f.engine));
  f.throughput.dataset = f.dataset;
  PAGODA_ASSIGN_OR_RETURN(f.throughput.prompts,
                          dataset_prompts(f, source, *engine, f.throughput.input_len));
  auto result = pagoda::bench::run_throughput_bench(*engine, f.throughput);
  engine->drain();
  if (!result.ok()) return result.error();
  auto report = pagoda::bench::throughput_report(
      f.throughput, *result, engine->info().served_model_name, engine->info().device);
  std::printf("%s", pagoda::bench::format_throughput_report(report).c_str());
  return write_json(f.result_json, report);
}

Status run_inproc_command(InprocFlags& f) {
  return f.latency_cmd->parsed() ? run_latency(f) : run_throughput(f);
}
#endif  // PAGODA_HAVE_BENCH_INPROC

int run_bench(int argc, char** argv) {
  CLI::App app{
      "Benchmarks: serve (online, over HTTP against an OpenAI-compatible server), "
      "latency and throughput (in-process, through the engine)"};
  app.require_subcommand(1);
  ServeFlags serve;
  auto* serve_cmd =
      app.add_subcommand("serve",
                         "stream requests to a running server and measure TTFT, TPOT, ITL, "
                         "E2E latency, throughput and goodput (like `vllm bench serve`)");
  add_serve_flags(serve_cmd, serve);
#ifdef PAGODA_HAVE_BENCH_INPROC
  InprocFlags inproc;
  add_inproc_commands(app, inproc);
#else
  for (const char* name : {"latency", "throughput"})
    app.add_subcommand(name,
                       "in-process engine bench (not in this build: it has no engine library)")
        ->allow_extras();
#endif
  pagoda::app::rewrite_engine_aliases(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Status st;
  if (serve_cmd->parsed()) {
    st = finish_serve_flags(serve_cmd, serve);
    if (st.ok()) st = pagoda::bench::run_serve_bench(serve.o);
  } else {
#ifdef PAGODA_HAVE_BENCH_INPROC
    st = run_inproc_command(inproc);
#else
    st = pagoda::make_error(ErrorCode::kUnsupported,
                            "this build has no engine: in-process benches are unavailable");
#endif
  }
  if (!st.ok()) {
    std::fprintf(stderr, "pagoda bench: %s\n", st.error().message.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

PAGODA_COMMAND(bench, "benchmark a server (serve) or the engine in-process (latency, throughput)",
               run_bench);
