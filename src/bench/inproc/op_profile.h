// `pagoda bench latency --profile-ops`: where a decode step's device time
// goes. After the timed iterations the engine runs one more batch, eagerly
// (ModelRunner::pause_graphs), with its ProfilingBackend recording
// (backend/profiling_backend.h); the last num_steps decode steps of that
// batch are summed per op label into records, and the sum of their op times
// is set against the timed step (TPOT): the difference is what the ops'
// timing leaves out (launch gaps, host work, sampling's wait), which graph
// replay hides in the timed run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/profiling_backend.h"
#include "bench/bandwidth.h"
#include "core/result.h"
#include "engine/llm_engine.h"
#include "model/model_runner.h"
#include "model/weights.h"

namespace pagoda::bench {

// One op label over the profiled decode steps.
struct OpProfileRecord {
  std::string op;               // ProfiledOp::label
  double calls_per_step = 0.0;  // calls / steps
  double us_per_step = 0.0;     // total device µs / steps
  double us_per_call = 0.0;
  double bytes_per_call = 0.0;  // 0: not estimated (ProfiledOp::bytes)
};

struct OpProfile {
  std::vector<OpProfileRecord> records;  // by us_per_step, largest first
  int num_steps = 0;
  int64_t batch_size = 0;
  int64_t context_len = 0;   // tokens in each sequence's context at the first profiled step
  double sum_us_per_step = 0.0;  // over the records
  std::string method;            // OpTimer::method()
};

// Linear weights' names by data pointer, for ProfilingBackend labels:
// "qkv", "o_proj", "gate_up", "down", "router", "shared_gate_up",
// "shared_down", "shared_gate" (every layer's under the same name) and
// "lm_head".
std::unordered_map<const void*, std::string> linear_weight_names(const ModelWeights& weights);

// The records of the last `num_steps` steps of `trace` that are decode
// steps of `batch_size` rows (ProfiledStep: num_tokens == batch_size,
// max_query_len 1). Errors: fewer such steps.
Result<OpProfile> summarize_op_profile(const ProfileTrace& trace, int64_t batch_size,
                                       int num_steps);

struct OpProfileOptions {
  int num_steps = 3;
  int64_t batch_size = 1;
  int64_t context_len = 1;  // prompt tokens: the first decode step's context is one more
  // Steps the batch's prefill may take before every sequence decodes
  // (ceil(batch_size * context_len / max_num_batched_tokens)). The requests
  // reach the engine one by one, so their prefills may also be staggered by
  // up to batch_size steps: the batch generates num_steps + prefill_steps +
  // batch_size + 1 tokens (profile_output_len).
  int64_t prefill_steps = 1;
  uint64_t seed = 0;
};

inline int64_t profile_output_len(const OpProfileOptions& o) {
  return o.num_steps + o.prefill_steps + o.batch_size + 1;
}

// Runs batch_size random prompts of context_len tokens for
// profile_output_len(options) output tokens on `engine` (idle before and after) with graphs paused on
// `runner` and `profiler` recording, and summarises the decode steps.
Result<OpProfile> run_op_profile(LlmEngine& engine, ModelRunner& runner,
                                 ProfilingBackend& profiler, const OpProfileOptions& options);

// JSON: "op_profile" (the records, each with gbps and pct_of_ceiling when
// bytes and a ceiling are known) and "op_profile_summary" (num_steps,
// batch_size, context_len, method, sum_us_per_step, timed_step_us = the
// timed TPOT, gap_us = timed_step_us - sum_us_per_step).
void add_op_profile(nlohmann::json& report, const OpProfile& profile, double timed_step_us,
                    const std::optional<BandwidthCeiling>& ceiling);
// The table of add_op_profile's fields, sorted as the records are.
std::string format_op_profile(const nlohmann::json& report);

}  // namespace pagoda::bench
