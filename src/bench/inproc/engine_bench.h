// In-process engine benches (no HTTP): `pagoda bench latency` (W1: a batch
// of identical-shape requests, timed per iteration) and `pagoda bench
// throughput` (W2/W6: every request added at once). Requests carry random
// prompt token ids, greedy sampling, ignore_eos and an exact max_tokens, so
// every request generates exactly its output length.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bench/bandwidth.h"
#include "core/result.h"
#include "engine/engine_api.h"
#include "sample/structured_output.h"

namespace pagoda::bench {

// The sampling parameters of every bench request: greedy, ignore_eos,
// max_tokens = output_len.
SamplingParams bench_sampling_params(int64_t output_len);

// Timing of one request of a batch, seconds from the batch start.
struct RequestTiming {
  double first_token = 0.0;  // first event with tokens
  double end = 0.0;          // final event
  int64_t num_prompt_tokens = 0;
  int64_t num_output_tokens = 0;
  bool aborted = false;
};

// Adds every prompt at once (each constrained by `constraint` when it is not
// null) and waits until all have finished. Errors: an add_request refusal
// (the requests added before it are aborted first).
Result<std::vector<RequestTiming>> run_engine_batch(
    Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
    const std::vector<int64_t>& output_lens, const std::string& id_prefix,
    std::shared_ptr<const CompiledConstraint> constraint = nullptr);

// The engine's compiled form of `spec` (null when there is none), for
// run_engine_batch. Errors: the engine's compile error.
Result<std::shared_ptr<const CompiledConstraint>> compile_bench_constraint(
    const Engine& engine, const std::optional<StructuredOutputSpec>& spec);

// Engine steps over a timed span (EngineMetrics differences).
struct StepTotals {
  StepTimes all;
  StepTimes graph;  // the decode-graph replays among them
  uint64_t overlapped = 0;  // steps whose successor was launched while they ran
};
StepTotals step_totals_between(const EngineMetrics& before, const EngineMetrics& after);

struct LatencyBenchOptions {
  int64_t input_len = 1024;
  int64_t output_len = 256;
  int64_t batch_size = 1;
  int num_iters = 10;
  int num_warmup = 2;
  uint64_t seed = 0;
  std::optional<StructuredOutputSpec> constraint;  // set: every request follows it
};

// Per timed iteration (fresh random prompts each time, so prefix caching
// never hits): the batch's mean TTFT and TPOT, and its end-to-end latency.
struct LatencyBenchResult {
  std::vector<double> ttft_s;
  std::vector<double> tpot_s;
  std::vector<double> latency_s;
  int64_t min_output_tokens = 0;  // fewest tokens any request produced (== output_len when healthy)
  StepTotals steps;                // over the timed iterations
};

Result<LatencyBenchResult> run_latency_bench(Engine& engine, const LatencyBenchOptions& options);

struct ThroughputBenchOptions {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 1024;
  double range_ratio = 0.0;
  uint64_t seed = 0;
  std::optional<StructuredOutputSpec> constraint;  // set: every request follows it
};

struct ThroughputBenchResult {
  double elapsed_s = 0.0;
  int64_t num_requests = 0;
  int64_t num_prompt_tokens = 0;
  int64_t num_output_tokens = 0;
  StepTotals steps;
};

Result<ThroughputBenchResult> run_throughput_bench(Engine& engine,
                                                   const ThroughputBenchOptions& options);

// The device's copy bandwidth through a backend's own allocate/copy_device
// (2 x 1 GiB buffers by default): the ceiling for CUDA runs, once the engine
// exposes its Backend.
Result<BandwidthCeiling> measure_backend_bandwidth(Backend& backend, size_t bytes = size_t{1} << 30,
                                                   int iters = 10);

}  // namespace pagoda::bench
