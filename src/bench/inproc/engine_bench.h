// In-process engine benches (no HTTP): `pagoda bench latency` (W1: a batch
// of identical-shape requests, timed per iteration) and `pagoda bench
// throughput` (W2/W6: every request added at once). Requests carry random
// prompt token ids or a dataset's prompts (PromptMaker: W7), greedy
// sampling, ignore_eos and an exact max_tokens, so every request generates
// exactly its output length.
#pragma once

#include <cstdint>
#include <functional>
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
  std::vector<int32_t> output_ids;  // the tokens generated
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

// Speculative decoding's counters over a span (EngineMetrics::spec_*
// differences); accepted_per_position is empty when speculation was off.
struct SpecTotals {
  uint64_t num_drafts = 0;  // verifications of a drafted sequence
  uint64_t num_draft_tokens = 0;
  uint64_t num_accepted_tokens = 0;
  std::vector<uint64_t> accepted_per_position;  // [num_speculative_tokens]
  int32_t backoff_cap = 0;  // the back-off cap at the span's end (EngineMetrics::spec_backoff_cap)
  std::optional<double> verify_extra_cost;  // its r (EngineMetrics::spec_verify_extra_cost)
};

// Engine steps over a timed span (EngineMetrics differences).
struct StepTotals {
  StepTimes all;
  StepTimes graph;  // the decode-graph replays among them
  uint64_t decode_only = 0;  // steps whose every sequence had one new token (any backend)
  uint64_t overlapped = 0;  // steps whose successor was launched while they ran
  uint64_t held = 0;  // steps the adaptive rule kept from running ahead (EngineMetrics::held_steps)
  SpecTotals spec;
};
StepTotals step_totals_between(const EngineMetrics& before, const EngineMetrics& after);

// The prompts of requests first .. first + count - 1 of a bench (a dataset
// such as W7, bench/inproc/w7_editing.h); the same numbers give the same
// prompts.
using PromptMaker =
    std::function<Result<std::vector<std::vector<int32_t>>>(int64_t first, int64_t count)>;

// A prompt and the tokens the engine generated for it.
struct Recording {
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
};

struct LatencyBenchOptions {
  int64_t input_len = 1024;
  int64_t output_len = 256;
  int64_t batch_size = 1;
  int num_iters = 10;
  int num_warmup = 2;
  uint64_t seed = 0;
  std::optional<StructuredOutputSpec> constraint;  // set: every request follows it
  // Set: iteration `it`'s requests are prompts(it * batch_size, batch_size)
  // (input_len is the dataset's bound); null: random token ids of input_len.
  PromptMaker prompts;
  std::string dataset = "random";  // the name the report gives the prompts
  bool record_outputs = false;     // fill LatencyBenchResult::recordings
};

// Per timed iteration (fresh random prompts each time, so prefix caching
// never hits): the batch's mean TTFT and TPOT, and its end-to-end latency.
struct LatencyBenchResult {
  std::vector<double> ttft_s;
  std::vector<double> tpot_s;
  std::vector<double> latency_s;
  int64_t min_output_tokens = 0;  // fewest tokens any request produced (== output_len when healthy)
  double mean_prompt_tokens = 0.0;  // over the timed requests
  StepTotals steps;                // over the timed iterations
  // With record_outputs: every request's prompt and output, warmup included.
  std::vector<Recording> recordings;
};

Result<LatencyBenchResult> run_latency_bench(Engine& engine, const LatencyBenchOptions& options);

struct ThroughputBenchOptions {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 1024;
  double range_ratio = 0.0;
  uint64_t seed = 0;
  std::optional<StructuredOutputSpec> constraint;  // set: every request follows it
  PromptMaker prompts;  // set: prompts(0, num_prompts); null: random ids (input_len, range_ratio)
  std::string dataset = "random";
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
