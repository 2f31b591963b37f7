#include "bench/inproc/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>

#include "backend/backend.h"
#include "bench/dataset.h"

namespace pagoda::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Filled by the sinks on the engine thread; read by the waiting thread.
struct BatchState {
  std::mutex mu;
  std::condition_variable cv;
  Clock::time_point start;
  std::vector<RequestTiming> timings;
  std::vector<bool> seen_first, finished;
  int64_t num_finished = 0;
};

OutputSink make_sink(const std::shared_ptr<BatchState>& state, size_t i) {
  return [state, i](RequestOutput&& out) {
    double t = std::chrono::duration<double>(Clock::now() - state->start).count();
    std::lock_guard<std::mutex> lock(state->mu);
    RequestTiming& r = state->timings[i];
    if (!out.token_ids.empty() && !state->seen_first[i]) {
      state->seen_first[i] = true;
      r.first_token = t;
    }
    r.num_prompt_tokens = out.num_prompt_tokens;
    if (out.index == 0)
      r.output_ids.insert(r.output_ids.end(), out.token_ids.begin(), out.token_ids.end());
    r.num_output_tokens = std::max(r.num_output_tokens, out.num_output_tokens);
    if (out.finish_reason && !state->finished[i]) {
      state->finished[i] = true;
      r.end = t;
      r.aborted = *out.finish_reason == FinishReason::kAbort;
      ++state->num_finished;
      state->cv.notify_all();
    }
  };
}

std::vector<std::vector<int32_t>> random_prompts(int64_t n, int64_t len, double range_ratio,
                                                 int64_t vocab, uint64_t seed,
                                                 std::vector<int64_t>* output_lens,
                                                 int64_t output_len) {
  TokenPool pool(static_cast<size_t>(std::max<int64_t>(vocab, 1)));
  std::iota(pool.begin(), pool.end(), 0);
  auto reqs = make_random_requests({n, len, output_len, range_ratio, 0, seed}, pool);
  std::vector<std::vector<int32_t>> prompts;
  if (!reqs.ok()) return prompts;
  for (auto& r : *reqs) {
    prompts.push_back(std::move(r.prompt_ids));
    if (output_lens) output_lens->push_back(r.output_len);
  }
  return prompts;
}

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

SamplingParams bench_sampling_params(int64_t output_len) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = static_cast<int32_t>(output_len);
  return p;
}

Result<std::vector<RequestTiming>> run_engine_batch(
    Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
    const std::vector<int64_t>& output_lens, const std::string& id_prefix,
    std::shared_ptr<const CompiledConstraint> constraint) {
  auto state = std::make_shared<BatchState>();
  state->timings.resize(prompts.size());
  state->seen_first.assign(prompts.size(), false);
  state->finished.assign(prompts.size(), false);
  state->start = Clock::now();
  size_t num_added = 0;
  Status refused;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateRequest req{
        id_prefix + std::to_string(i), prompts[i], bench_sampling_params(output_lens[i]), 0,
        make_sink(state, i),           constraint};
    refused = engine.add_request(std::move(req));
    if (!refused.ok()) break;
    ++num_added;
  }
  if (!refused.ok())
    for (size_t i = 0; i < num_added; ++i) engine.abort(id_prefix + std::to_string(i));
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] { return state->num_finished == static_cast<int64_t>(num_added); });
  if (!refused.ok())
    return make_error(refused.error().code, "request " + std::to_string(num_added) +
                                                " refused: " + refused.error().message);
  return state->timings;
}

Result<std::shared_ptr<const CompiledConstraint>> compile_bench_constraint(
    const Engine& engine, const std::optional<StructuredOutputSpec>& spec) {
  if (!spec) return std::shared_ptr<const CompiledConstraint>{};
  return engine.compile_constraint(*spec);
}

StepTotals step_totals_between(const EngineMetrics& before, const EngineMetrics& after) {
  SpecTotals spec{after.spec_num_drafts - before.spec_num_drafts,
                  after.spec_num_draft_tokens - before.spec_num_draft_tokens,
                  after.spec_num_accepted_tokens - before.spec_num_accepted_tokens,
                  after.spec_accepted_per_position, after.spec_backoff_cap,
                  after.spec_verify_extra_cost};
  for (size_t j = 0;
       j < spec.accepted_per_position.size() && j < before.spec_accepted_per_position.size(); ++j)
    spec.accepted_per_position[j] -= before.spec_accepted_per_position[j];
  return {after.steps.minus(before.steps), after.graph_steps.minus(before.graph_steps),
          after.decode_only_steps - before.decode_only_steps,
          after.overlapped_steps - before.overlapped_steps, after.held_steps - before.held_steps,
          std::move(spec)};
}

Result<LatencyBenchResult> run_latency_bench(Engine& engine, const LatencyBenchOptions& o) {
  if (o.input_len < 1 || o.output_len < 1 || o.batch_size < 1 || o.num_iters < 1 ||
      o.num_warmup < 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "latency bench needs input_len, output_len, batch_size, num_iters >= 1 and "
                      "num_warmup >= 0");
  PAGODA_ASSIGN_OR_RETURN(auto constraint, compile_bench_constraint(engine, o.constraint));
  LatencyBenchResult out;
  out.min_output_tokens = o.output_len;
  const int64_t vocab = engine.info().vocab_size;
  EngineMetrics timed_start;
  int64_t prompt_tokens = 0, num_timed = 0;
  for (int it = 0; it < o.num_warmup + o.num_iters; ++it) {
    if (it == o.num_warmup) timed_start = engine.metrics();
    std::vector<std::vector<int32_t>> prompts;
    if (o.prompts) {
      PAGODA_ASSIGN_OR_RETURN(prompts, o.prompts(it * o.batch_size, o.batch_size));
    } else {
      prompts = random_prompts(o.batch_size, o.input_len, 0.0, vocab,
                               o.seed + static_cast<uint64_t>(it), nullptr, 1);
    }
    std::vector<int64_t> lens(prompts.size(), o.output_len);
    PAGODA_ASSIGN_OR_RETURN(
        auto timings,
        run_engine_batch(engine, prompts, lens, "lat-" + std::to_string(it) + "-", constraint));
    if (o.record_outputs)
      for (size_t i = 0; i < prompts.size(); ++i)
        out.recordings.push_back({prompts[i], timings[i].output_ids});
    if (it < o.num_warmup) continue;
    std::vector<double> ttft, tpot;
    double end = 0.0;
    for (const auto& t : timings) {
      if (t.aborted)
        return make_error(ErrorCode::kInternal, "the engine aborted a latency-bench request");
      ttft.push_back(t.first_token);
      if (t.num_output_tokens > 1)
        tpot.push_back((t.end - t.first_token) / static_cast<double>(t.num_output_tokens - 1));
      end = std::max(end, t.end);
      out.min_output_tokens = std::min(out.min_output_tokens, t.num_output_tokens);
      prompt_tokens += t.num_prompt_tokens;
      ++num_timed;
    }
    out.ttft_s.push_back(mean_of(ttft));
    out.tpot_s.push_back(mean_of(tpot));
    out.latency_s.push_back(end);
  }
  out.steps = step_totals_between(timed_start, engine.metrics());
  out.mean_prompt_tokens =
      num_timed > 0 ? static_cast<double>(prompt_tokens) / static_cast<double>(num_timed) : 0.0;
  return out;
}

Result<ThroughputBenchResult> run_throughput_bench(Engine& engine,
                                                   const ThroughputBenchOptions& o) {
  if (o.num_prompts < 1 || o.input_len < 1 || o.output_len < 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "throughput bench needs num_prompts, input_len, output_len >= 1");
  std::vector<int64_t> lens;
  std::vector<std::vector<int32_t>> prompts;
  if (o.prompts) {
    PAGODA_ASSIGN_OR_RETURN(prompts, o.prompts(0, o.num_prompts));
    lens.assign(prompts.size(), o.output_len);
  } else {
    prompts = random_prompts(o.num_prompts, o.input_len, o.range_ratio, engine.info().vocab_size,
                             o.seed, &lens, o.output_len);
  }
  if (prompts.empty())
    return make_error(ErrorCode::kInvalidArgument, "bad --range-ratio: must be in [0, 1)");
  PAGODA_ASSIGN_OR_RETURN(auto constraint, compile_bench_constraint(engine, o.constraint));
  const EngineMetrics before = engine.metrics();
  PAGODA_ASSIGN_OR_RETURN(auto timings,
                          run_engine_batch(engine, prompts, lens, "tput-", constraint));
  ThroughputBenchResult out;
  out.steps = step_totals_between(before, engine.metrics());
  out.num_requests = static_cast<int64_t>(timings.size());
  for (size_t i = 0; i < timings.size(); ++i) {
    out.elapsed_s = std::max(out.elapsed_s, timings[i].end);
    out.num_prompt_tokens += static_cast<int64_t>(prompts[i].size());
    out.num_output_tokens += timings[i].num_output_tokens;
  }
  return out;
}

Result<BandwidthCeiling> measure_backend_bandwidth(Backend& backend, size_t bytes, int iters) {
  return measure_copy_bandwidth([&](size_t n) { return backend.allocate(n); },
                                [&](void* p) { backend.deallocate(p); },
                                [&](void* dst, const void* src, size_t n) {
                                  backend.copy_device(dst, src, n);
                                  backend.synchronize();
                                },
                                bytes, iters, "device-to-device copy on " + backend.name());
}

}  // namespace pagoda::bench
