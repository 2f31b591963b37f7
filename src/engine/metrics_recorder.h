// Counters and latency histograms the engine thread records and frontends
// read as EngineMetrics snapshots. Thread-safe.
#pragma once

#include <mutex>

#include "engine/engine_api.h"

namespace pagoda {

// Adds one observation (seconds) to a cumulative histogram.
void observe(Histogram& h, double value);

class MetricsRecorder {
 public:
  MetricsRecorder();

  void on_admitted(int64_t num_prompt_tokens);
  void on_tokens(int64_t num_generated);
  void on_first_token(double ttft_s, double queue_s);
  void on_inter_token(double seconds);  // time between two tokens of one sequence
  void on_finished(FinishReason reason, double e2e_s);
  // One model step: its wall time, the part spent waiting for the device,
  // the part spent detokenizing and checking stops, whether it replayed a
  // decode graph and whether the next step was launched before its samples
  // were read.
  void on_step(double seconds, double device_wait_seconds, double detokenize_seconds, bool graph, bool overlapped);
  // State the engine thread refreshes after each step.
  void set_state(int64_t num_running, int64_t num_waiting, int64_t num_preemptions, double kv_usage,
                 int64_t prefix_queries, int64_t prefix_hits);

  EngineMetrics snapshot() const;

 private:
  mutable std::mutex mu_;
  EngineMetrics m_;
};

}  // namespace pagoda
