#include "bench/serve_bench.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "bench/arrivals.h"
#include "bench/dataset.h"
#include "bench/http_client.h"
#include "bench/openai_stream.h"
#include "bench/plots.h"
#include "bench/report.h"
#include "bench/stream_driver.h"
#include "core/progress.h"

namespace pagoda::bench {

namespace {

using nlohmann::json;

constexpr double kFetchTimeoutS = 30.0;
constexpr int kMaxErrorsShown = 10;

// Plain English text whose tokens become the id pool of random prompts when
// no --vocab-size is given: ids the server's tokenizer surely accepts.
constexpr const char* kPoolText =
    "The quick brown fox jumps over the lazy dog while a gentle breeze moves through the tall "
    "grass. "
    "Scientists measured the temperature of the ocean at several depths and found that the water "
    "grew "
    "colder as they descended, although currents carried warm layers far from the equator. In the "
    "old "
    "library, readers turned yellow pages of history, mathematics, music and poetry; the clock "
    "struck "
    "seven, and the lamps were lit one by one. Markets opened early: farmers sold apples, bread, "
    "cheese, "
    "honey and fresh vegetables, counting coins and laughing with neighbours. Engineers designed a "
    "bridge "
    "of steel and stone, computing loads, angles and the strength of every joint before "
    "construction "
    "began. Children played football in the park, birds sang in the trees, and somewhere a train "
    "whistled as it crossed the river towards the mountains in the north. 0123456789 "
    ",.;:!?'\"()[]{}";

struct Context {
  const ServeBenchOptions& opts;
  HttpUrl url;
  std::string api_key;
  std::string model;
  Api api = Api::kCompletions;
};

Result<json> fetch_json(const Context& c, std::string_view method, std::string_view path,
                        const json& body) {
  PAGODA_ASSIGN_OR_RETURN(
      auto resp, http_fetch(c.url, method, path, body.is_null() ? "" : body.dump(), c.api_key,
                            kFetchTimeoutS));
  if (resp.status != 200)
    return make_error(ErrorCode::kIo, fmt::format("{} {} answered HTTP {}: {}", method, path,
                                                  resp.status, resp.body.substr(0, 300)));
  try {
    return json::parse(resp.body);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("{} {}: the answer is not JSON: {}", method, path, e.what()));
  }
}

// GET /v1/models until it answers (the server may still be starting) and
// returns the first model id.
Result<std::string> first_model(const Context& c) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(c.opts.ready_timeout_s);
  while (true) {
    auto r = fetch_json(c, "GET", "/v1/models", nullptr);
    if (r.ok()) {
      const json& j = r.value();
      if (j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
          j["data"][0].contains("id") && j["data"][0]["id"].is_string())
        return j["data"][0]["id"].get<std::string>();
      return make_error(ErrorCode::kNotFound, "GET /v1/models lists no model; pass --model");
    }
    if (std::chrono::steady_clock::now() >= deadline) return r.error();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

Result<std::vector<int32_t>> tokenize(const Context& c, const std::string& text) {
  PAGODA_ASSIGN_OR_RETURN(
      json j, fetch_json(c, "POST", "/tokenize",
                         {{"model", c.model}, {"prompt", text}, {"add_special_tokens", false}}));
  if (!j.contains("tokens") || !j["tokens"].is_array())
    return make_error(ErrorCode::kCorrupt, "POST /tokenize: no 'tokens' array in the answer");
  try {
    return j["tokens"].get<std::vector<int32_t>>();
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kCorrupt,
                      std::string("POST /tokenize: bad 'tokens': ") + e.what());
  }
}

Result<TokenPool> token_pool(const Context& c) {
  TokenPool pool;
  if (c.opts.vocab_size > 0) {
    for (int64_t i = 0; i < c.opts.vocab_size; ++i) pool.push_back(static_cast<int32_t>(i));
    return pool;
  }
  auto ids = tokenize(c, kPoolText);
  if (!ids.ok())
    return make_error(
        ErrorCode::kInvalidArgument,
        "random prompts need token ids: pass --vocab-size, or use a server with /tokenize (" +
            ids.error().message + ")");
  std::set<int32_t> unique(ids->begin(), ids->end());
  pool.assign(unique.begin(), unique.end());
  return pool;
}

// Token counter for ShareGPT text: the server's /tokenize when it answers,
// else the chars/4 estimate.
TokenCounter make_token_counter(const Context& c) {
  bool server = tokenize(c, "hello world").ok();
  std::printf("ShareGPT lengths: %s\n",
              server ? "counted by the server's /tokenize" : "estimated as chars/4 (no /tokenize)");
  if (!server) return [](const std::string& s) -> Result<int64_t> { return estimate_tokens(s); };
  return [&c](const std::string& s) -> Result<int64_t> {
    PAGODA_ASSIGN_OR_RETURN(auto ids, tokenize(c, s));
    return static_cast<int64_t>(ids.size());
  };
}

// Chat requests carry text: token-id prompts are turned into text by the
// server's /detokenize.
Status detokenize_prompts(const Context& c, std::vector<BenchRequest>& requests) {
  for (auto& r : requests) {
    if (r.prompt_ids.empty()) continue;
    auto j = fetch_json(c, "POST", "/detokenize", {{"model", c.model}, {"tokens", r.prompt_ids}});
    if (!j.ok() || !j->contains("prompt") || !(*j)["prompt"].is_string())
      return make_error(
          ErrorCode::kInvalidArgument,
          "the chat endpoint needs text prompts: token-id datasets are turned into text with the "
          "server's /detokenize, which failed" +
              (j.ok() ? std::string() : ": " + j.error().message));
    r.prompt_text = (*j)["prompt"].get<std::string>();
    r.prompt_ids.clear();
  }
  return Status::Ok();
}

Result<std::vector<BenchRequest>> build_dataset(const Context& c) {
  const auto& o = c.opts;
  std::vector<BenchRequest> requests;
  if (o.dataset == DatasetKind::kShareGpt && !o.dataset_path.empty()) {
    PAGODA_ASSIGN_OR_RETURN(requests, load_sharegpt_requests(o.dataset_path, o.num_prompts,
                                                             o.output_len_set ? o.output_len : 0,
                                                             o.seed, make_token_counter(c)));
  } else {
    PAGODA_ASSIGN_OR_RETURN(TokenPool pool, token_pool(c));
    if (o.dataset == DatasetKind::kShareGpt) {
      PAGODA_ASSIGN_OR_RETURN(
          requests, make_sharegpt_like_requests(o.num_prompts, o.output_len_set ? o.output_len : 0,
                                                o.seed, pool));
    } else {
      RandomSpec spec{o.num_prompts, o.input_len,  o.output_len,
                      o.range_ratio, o.prefix_len, o.seed};
      PAGODA_ASSIGN_OR_RETURN(requests, make_random_requests(spec, pool));
    }
  }
  if (c.api == Api::kChat) PAGODA_RETURN_IF_ERROR(detokenize_prompts(c, requests));
  return requests;
}

const char* dataset_name(DatasetKind k) {
  switch (k) {
    case DatasetKind::kRandom:
      return "random";
    case DatasetKind::kShareGpt:
      return "sharegpt";
    case DatasetKind::kPrefix:
      return "prefix";
  }
  return "?";
}

// Sends the first request alone until it succeeds or the ready timeout
// passes (the server may still be loading).
Status ready_check(const Context& c, const StreamTarget& target, const PlannedRequest& first) {
  if (c.opts.ready_timeout_s <= 0.0) return Status::Ok();
  std::printf("Starting initial single prompt test run...\n");
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(c.opts.ready_timeout_s);
  PlannedRequest p = first;
  p.arrival = 0.0;
  while (true) {
    PAGODA_ASSIGN_OR_RETURN(auto r, drive_requests(target, {p}, 0, nullptr));
    if (r.records[0].success) break;
    if (std::chrono::steady_clock::now() >= deadline)
      return make_error(ErrorCode::kIo, "initial test request failed: " + r.records[0].error +
                                            " (check --base-url, --endpoint, --model)");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::printf("Initial test run completed. Starting main benchmark run...\n");
  return Status::Ok();
}

struct RunOutcome {
  RunConfig config;
  std::vector<RequestRecord> records;
  ServeMetrics metrics;
};

RunConfig run_config(const Context& c, double rate) {
  const auto& o = c.opts;
  return {o.base_url,        o.endpoint,    c.model,      dataset_name(o.dataset),
          o.dataset_path,    o.num_prompts, rate,         o.burstiness,
          o.max_concurrency, o.input_len,   o.output_len, o.prefix_len,
          o.range_ratio,     o.seed,        o.slo,        o.percentiles};
}

void print_failures(const std::vector<RequestRecord>& records) {
  int shown = 0;
  for (const auto& r : records) {
    if (r.success) continue;
    if (shown == 0) std::fprintf(stderr, "Failed requests (first %d):\n", kMaxErrorsShown);
    if (shown++ == kMaxErrorsShown) break;
    std::fprintf(stderr, "  %s\n", r.error.c_str());
  }
}

Result<RunOutcome> run_once(const Context& c, const StreamTarget& target,
                            std::vector<PlannedRequest> plan, double rate) {
  const auto& o = c.opts;
  PAGODA_ASSIGN_OR_RETURN(auto arrivals, arrival_offsets(static_cast<int64_t>(plan.size()), rate,
                                                         o.burstiness, o.seed));
  for (size_t i = 0; i < plan.size(); ++i) plan[i].arrival = arrivals[i];
  std::printf("Traffic request rate: %s\n",
              std::isinf(rate) ? "inf" : fmt::format("{}", rate).c_str());
  std::printf("Burstiness factor: %g (%s)\n", o.burstiness,
              o.burstiness == 1.0 ? "Poisson process" : "Gamma distribution");
  std::printf("Maximum request concurrency: %s\n",
              o.max_concurrency > 0 ? std::to_string(o.max_concurrency).c_str() : "None");
  std::fflush(stdout);
  Progress bar("bench serve", plan.size(), o.progress);
  auto show = [&bar, total = plan.size()](int64_t n, int64_t f) {
    bar.update(static_cast<uint64_t>(n), fmt::format("{}/{} requests, {} failed", n, total, f));
  };
  PAGODA_ASSIGN_OR_RETURN(auto result, drive_requests(target, plan, o.max_concurrency, show));
  bar.finish();
  RunOutcome out{run_config(c, rate), std::move(result.records), {}};
  out.metrics = compute_serve_metrics(out.records, result.duration_s, o.slo, o.percentiles);
  print_failures(out.records);
  std::printf("%s", format_summary(out.config, out.metrics).c_str());
  std::fflush(stdout);
  return out;
}

std::string rate_label(double rate) {
  return std::isinf(rate) ? "inf" : fmt::format("{}", rate);
}

Status write_outputs(const ServeBenchOptions& o, const std::vector<RunOutcome>& runs) {
  if (!o.result_json.empty()) {
    json doc;
    if (o.sweep_rates.empty()) {
      doc = result_json(runs[0].config, runs[0].metrics, runs[0].records);
    } else {
      doc = {{"sweep", json::array()}};
      for (const auto& r : runs)
        doc["sweep"].push_back(result_json(r.config, r.metrics, r.records));
    }
    std::ofstream f(o.result_json, std::ios::trunc);
    f << doc.dump(2) << "\n";
    f.close();
    if (!f)
      return make_error(ErrorCode::kIo, "cannot write --result-json file '" + o.result_json + "'");
    std::printf("Results written to %s\n", o.result_json.c_str());
  }
  if (!o.plots_dir.empty()) {
    std::vector<PlotRun> plot_runs;
    for (const auto& r : runs)
      plot_runs.push_back({rate_label(r.config.request_rate), &r.records, &r.metrics});
    PAGODA_RETURN_IF_ERROR(plot_latency_cdfs(o.plots_dir, plot_runs));
    if (!o.sweep_rates.empty()) PAGODA_RETURN_IF_ERROR(plot_sweep(o.plots_dir, plot_runs));
    std::printf("Plots written to %s\n", o.plots_dir.c_str());
  }
  return Status::Ok();
}

// One socket per request in flight: lift the soft descriptor limit to the
// hard one so thousands of concurrent streams do not fail with EMFILE.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace

Status run_serve_bench(const ServeBenchOptions& options) {
  PAGODA_ASSIGN_OR_RETURN(HttpUrl url, parse_base_url(options.base_url));
  if (options.num_prompts < 1)
    return make_error(ErrorCode::kInvalidArgument, "--num-prompts must be >= 1");
  Context c{options, url, options.api_key, options.model, api_for_endpoint(options.endpoint)};
  if (c.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY")) c.api_key = env;
  }
  if (c.model.empty()) {
    PAGODA_ASSIGN_OR_RETURN(c.model, first_model(c));
  }
  PAGODA_ASSIGN_OR_RETURN(auto requests, build_dataset(c));
  PayloadOptions payload{c.model, options.ignore_eos, 0.0, options.constraint};
  std::vector<PlannedRequest> plan;
  for (const auto& r : requests)
    plan.push_back({build_request_body(c.api, r, payload), r.prompt_len, 0.0});
  StreamTarget target{url, options.endpoint, c.api_key, options.request_timeout_s};
  raise_fd_limit();
  PAGODA_RETURN_IF_ERROR(ready_check(c, target, plan[0]));
  std::vector<double> rates = options.sweep_rates;
  if (rates.empty()) rates.push_back(options.request_rate);
  std::vector<RunOutcome> runs;
  for (double rate : rates) {
    PAGODA_ASSIGN_OR_RETURN(auto run, run_once(c, target, plan, rate));
    runs.push_back(std::move(run));
  }
  return write_outputs(options, runs);
}

}  // namespace pagoda::bench
