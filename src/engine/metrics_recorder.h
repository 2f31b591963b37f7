// Counters and histograms the engine thread records and frontends read as
// EngineMetrics snapshots. Thread-safe; no call allocates.
#pragma once

#include <mutex>
#include <optional>

#include "engine/engine_api.h"

namespace pagoda {

// What the engine knows of a request when it ends (plain data; seconds are
// on the engine's steady clock).
struct FinishedRequestStats {
  FinishReason reason = FinishReason::kStop;
  double e2e_s = 0.0;        // arrival -> finished
  double queue_s = 0.0;      // arrival -> first scheduled
  double prefill_s = 0.0;    // first scheduled -> first token
  double decode_s = 0.0;     // first token -> last token
  double inference_s = 0.0;  // first scheduled -> last token
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_prompt_tokens = 0;  // served by the prefix cache
  int64_t num_generation_tokens = 0;     // over all samples
  int64_t max_sample_tokens = 0;         // the longest sample's
  int64_t n = 1;                         // the request's n
  int64_t max_tokens = 0;                // resolved per-sample cap
};

class MetricsRecorder {
 public:
  // Token-count histograms get 1-2-5 buckets up to max_model_len;
  // num_speculative_tokens sizes the per-position acceptance counts.
  MetricsRecorder(int64_t max_model_len, int32_t num_speculative_tokens);

  void on_tokens(int64_t num_generated);
  // The request's first token: its time to first token and its prompt, now
  // prefilled (EngineMetrics::prompt_tokens).
  void on_first_token(double ttft_s, int64_t num_prompt_tokens);
  void on_inter_token(double seconds);  // time between two tokens of one sample
  void on_finished(const FinishedRequestStats& stats);
  // A step was launched with this many tokens (prefill chunks + decodes).
  void on_launch(int64_t num_tokens);
  // One model step: its wall time, the part spent waiting for the device,
  // the part spent detokenizing and checking stops, whether it replayed a
  // (decode or verification) graph, whether every sequence in it had one new
  // token (EngineMetrics::decode_only_steps) and whether the next step was
  // launched before its samples were read, or could have been but the
  // adaptive rule held it (EngineMetrics::held_steps).
  void on_step(double seconds, double device_wait_seconds, double detokenize_seconds, bool graph,
               bool decode_only, bool overlapped, bool held);
  // A drafted sequence was verified: num_accepted of its num_drafted drafts
  // kept (the first num_accepted positions).
  void on_spec_verified(int32_t num_drafted, int32_t num_accepted);
  // The back-off cap the engine uses now and the measured r it was picked
  // from (EngineMetrics::spec_backoff_cap, spec_verify_extra_cost).
  void set_spec_backoff_cap(int32_t cap, std::optional<double> extra_cost);
  // State the engine thread refreshes after each step.
  void set_state(int64_t num_running, int64_t num_waiting, int64_t num_preemptions, double kv_usage,
                 int64_t prefix_queries, int64_t prefix_hits);

  EngineMetrics snapshot() const;

 private:
  mutable std::mutex mu_;
  EngineMetrics m_;
};

}  // namespace pagoda
