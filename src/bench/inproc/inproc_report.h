// Results of the in-process benches against their ceilings: achieved decode
// bandwidth vs the measured copy bandwidth (speed of light at this batch),
// prefill FLOP/s vs the matrix rate, and throughput figures. JSON for files,
// text for the terminal.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bench/bandwidth.h"
#include "bench/inproc/engine_bench.h"
#include "bench/inproc/model_cost.h"

namespace pagoda::bench {

struct LatencyReportInputs {
  LatencyBenchOptions options;
  LatencyBenchResult result;
  ModelCost cost;
  double bytes_per_weight = 2.0;  // the device's compute dtype (cpu f32: 4, cuda bf16: 2)
  double bytes_per_kv_elem = 2.0;
  std::optional<BandwidthCeiling> bandwidth;
  double matrix_flops_per_s = 0.0;  // 0: unknown (no prefill ratio)
  std::string device;
  std::string model;
  int tensor_parallel_size = 1;    // the run's --tensor-parallel-size
  int pipeline_parallel_size = 1;  // the run's --pipeline-parallel-size
};

// Fields: ttft/tpot/latency {mean,median,p90,p99}_ms; decode_bytes_per_step
// (weights + KV at the mean decode context input_len + (output_len-1)/2);
// achieved_gbps = bytes / mean TPOT; ceiling_gbps, speed_of_light_tpot_ms,
// pct_of_speed_of_light (when a bandwidth is known); with tensor or pipeline
// parallelism also tensor/pipeline_parallel_size and decode_bytes_per_rank
// (decode_bytes_per_rank in model_cost.h), and then achieved_gbps, the speed
// of light and its percentage are per GPU: the bytes one GPU reads on the
// step's critical path against one GPU's ceiling; prefill_tok_s =
// batch * input_len / mean TTFT; prefill_tflops and pct_of_matrix_ceiling.
nlohmann::json latency_report(const LatencyReportInputs& in);
std::string format_latency_report(const nlohmann::json& report);

// Fields: elapsed_s, requests_per_s, output_tok_s, total_tok_s and counts.
// Both reports add num_steps, num_graph_steps, num_decode_only_steps,
// num_overlapped_steps, num_held_steps, host_us_per_step (and per graph /
// eager step) and device_wait_pct (StepTotals).
nlohmann::json throughput_report(const ThroughputBenchOptions& options,
                                 const ThroughputBenchResult& result, const std::string& model,
                                 const std::string& device);
std::string format_throughput_report(const nlohmann::json& report);

}  // namespace pagoda::bench
