// LlmEngine: the Engine implementation. One engine thread owns the
// scheduler, the model runner and every RequestState; other threads talk to
// it only through the command queue (add, abort) and the sinks it calls.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "engine/engine_api.h"
#include "engine/metrics_recorder.h"
#include "engine/request_state.h"
#include "engine/row_planner.h"
#include "engine/run_ahead_policy.h"
#include "engine/spec_cost_policy.h"
#include "engine/stats_logger.h"
#include "jinja/chat_template.h"
#include "model/runner.h"
#include "sample/sampling_params.h"
#include "sched/scheduler.h"
#include "spec/backoff.h"
#include "spec/proposer.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

namespace grammar {
class GrammarCompiler;
}

// Everything create_engine() loaded, handed to the engine.
struct EngineParts {
  EngineOptions options;
  ModelInfo info;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;
  // The runner's backend; null with tensor parallelism (the ParallelRunner
  // owns its ranks' backends). Destroyed after the runner.
  std::unique_ptr<Backend> backend;
  // One ModelRunner, or a ParallelRunner with --tensor-parallel-size > 1.
  std::unique_ptr<Runner> runner;
  SchedulerConfig scheduler_config;
  // The model's generation_config.json: requests' unset fields take its values.
  GenerationDefaults generation;
  std::vector<int32_t> eos_token_ids;
  // Speculative decoding's proposer (options.speculative; tests and
  // benchmarks may put their own); null: off.
  std::unique_ptr<Proposer> proposer;
  // Test hook: the drafts a verification keeps, given the target's samples
  // and the drafts; null: spec/verify.h's num_accepted, the exact rule
  // (tests give a biased one to show that the statistical test can fail).
  std::function<int32_t(std::span<const int32_t> samples, std::span<const int32_t> drafts)>
      acceptance_rule;
  // Test hook: run Scheduler::check_invariants() after every step; the first
  // failure is kept (LlmEngine::invariant_error()) and logged.
  bool check_invariants = false;
  // The adaptive rule of async scheduling (engine/run_ahead_policy.h) and its
  // clock (null: the steady clock; tests give a fake one).
  RunAheadPolicy::Config run_ahead = {};
  RunAheadPolicy::NowFn run_ahead_clock = {};
  // The clock that times steps for the back-off's cost-aware cap
  // (engine/spec_cost_policy.h; null: the steady clock; tests give a fake one).
  SpecCostPolicy::NowFn spec_cost_clock = {};
};

// Resolves and loads everything create_engine() needs without starting the
// engine, so that tests can adjust the parts (e.g. scheduler_config's
// max_chunk_tokens) first. tokenizer_path: a tokenizer to load instead of
// the model's own ("" = the model's; tests give tokenizer-less tiny models
// one).
Result<EngineParts> load_engine_parts(const EngineOptions& options,
                                      const std::string& tokenizer_path = {});

class LlmEngine final : public Engine {
 public:
  static Result<std::unique_ptr<LlmEngine>> start(EngineParts parts);
  ~LlmEngine() override;

  Status add_request(GenerateRequest request) override;
  Status add_requests(std::vector<GenerateRequest> requests, size_t* failed = nullptr) override;
  void abort(const std::string& request_id) override;
  const Tokenizer& tokenizer() const override { return *parts_.tokenizer; }
  bool has_chat_template() const override { return parts_.chat_template.has_value(); }
  Result<std::string> apply_chat_template(const ChatTemplateInputs& inputs) const override;
  const ModelInfo& info() const override { return parts_.info; }
  EngineMetrics metrics() const override { return metrics_.snapshot(); }
  // Speculative decoding's proposer, or null (tests: its own counters).
  const Proposer* proposer() const { return parts_.proposer.get(); }
  Result<std::shared_ptr<const CompiledConstraint>> compile_constraint(
      const StructuredOutputSpec& spec) const override;
  void drain() override;

  // Returns once every request added so far has sent its final events, no
  // step is in flight and the metrics reflect the idle state; the engine keeps accepting requests.
  // Not from the engine thread (a sink).
  void wait_idle();
  // wait_idle() for at most `timeout`; false when it ran out (tests).
  bool wait_idle_for(std::chrono::milliseconds timeout);
  // The first check_invariants failure ("" when none or when not checking).
  std::string invariant_error() const;

 private:
  // A launched step, until its samples are applied. (No member initializers:
  // std::optional<LaunchedStep> below needs it default-constructible while
  // LlmEngine is still incomplete.)
  struct LaunchedStep {
    ScheduleOutput out;
    std::vector<RowRef> refs;  // one per sampling row
    int slot;                  // the runner's step slot
    int64_t index;             // the step's number (num_launched_ at its launch)
    // A step planned ahead with constrained rows: their masks need the
    // running step's tokens. kSamplingDeferred: the forward is launched
    // (StepBatch::defer_sampling), the sampler waits; kNotLaunched: too many
    // rows to defer (more than one lm_head chunk), the whole launch waits.
    // finish_launch() completes either once the tokens are applied.
    enum class Stage { kLaunched, kSamplingDeferred, kNotLaunched } stage;
  };
  struct Command {
    std::unique_ptr<RequestState> add;  // set for an add
    std::string abort_id;               // set for an abort
  };
  // A sampled token of one sample and its row.
  struct SampledRow {
    int32_t token;
    size_t row;
    bool no_allowed_token;  // RowRef::no_allowed_token: the sample ends with an error instead
  };
  // Where a token handed to on_token stands in the scheduler's sequence:
  // its last token (sampled, uncomputed: jump-forward may replace it), or a
  // draft kept by verification with the step's later tokens after it (never
  // replaced).
  enum class TokenPlace { kLast, kKeptDraft };

  LlmEngine(EngineParts parts, Scheduler scheduler);

  // Caller-thread checks of add_request (the params, then the limits:
  // request_fit.h's fit_request); fills the resolved fields of `state`.
  Status prepare(const GenerateRequest& request, RequestState& state) const;

  // Engine thread.
  void loop();
  void apply_commands(std::deque<Command>& commands);
  void admit(std::unique_ptr<RequestState> state);
  void abort_now(const std::string& external_id);
  void step();
  // Plans the rows of `out` (row_planner.h) and launches it on the free
  // slot; on failure fails its batch (returns false).
  // `prev`: the step still running, whose samples feed the placeholders.
  bool launch(ScheduleOutput out, const LaunchedStep* prev, LaunchedStep& step);
  // The rest of a launch that waited for the previous step's tokens
  // (LaunchedStep::Stage): builds the sampling rows and masks from the
  // samples' current states and launches the sampler (or the whole step).
  // On failure fails its batch, ends its scheduler step and drops it
  // (returns false).
  bool finish_launch(LaunchedStep& step);
  // Turns the kSample rows of sequences in jumped_in_flight_ into kDiscard.
  void drop_jumped_rows(std::vector<RowRef>& refs) const;
  // Whether the step after one with rows `refs` must wait for their tokens
  // because of jump-forward: a row samples for a request that jumps forward
  // and the step has fewer than kMinRowsToPipelineJumps rows. Planned
  // ahead, a jump after token x replaces x while the step in flight
  // computes it (Scheduler::replace_in_flight): that row's work and sample
  // are dropped (RowKind::kDiscard), one step more for the row; the tokens
  // are the same either way. In a small batch that step costs more than the
  // host time that planning ahead hides.
  bool has_jump_forward_rows(std::span<const RowRef> refs) const;
  // Rows from which jump-forward rows are planned ahead (a heuristic: the
  // host step that overlap hides grows with the rows, ~2 ms at 256 rows of
  // the 8B shape on an H200, while a jump's extra step costs its own row only).
  static constexpr int64_t kMinRowsToPipelineJumps = 8;
  // Rows a step may reach with jump-forward's extra tokens (each jump of T
  // tokens adds T - 1 rows to the step that feeds it): jumps are taken, or
  // cut, while the scheduler's sequences (running, and waiting ones up to
  // max_num_seqs) plus the jumps granted after a step stay within this
  // bound (jump_rows_left_). A small step is bound by
  // reading the weights, so its extra rows cost nearly nothing and a jump
  // saves whole steps; in a large batch the forward is bound by compute,
  // jumped tokens cost what sampled ones do, and a few extra rows push the
  // step past a GEMM tile (H200, 8B shape, 256 rows of a nested-object
  // schema: +6.4% per step, 4% fewer output tok/s than without jumps).
  static constexpr int64_t kJumpForwardMaxStepRows = 64;
  // Speculative decoding, before a step is scheduled: drafts from the
  // proposer for every sample of a speculating request whose last token is
  // sampled and uncomputed (Scheduler::set_draft).
  void propose_drafts();
  // Async scheduling, before deciding whether the step after `refs` is
  // planned ahead (RowPlanner::drafts_due holds it for drafts): a sample
  // of `refs` due for drafts in that step (num_launched_) whose proposer
  // cannot draft after the token `refs` samples for it
  // (Proposer::may_draft_after_next_token) is moved to the step after
  // (spec_next_step), its back-off untouched, so that nothing holds the
  // step for it; it is asked again then, with that token known.
  void defer_undraftable(std::span<const RowRef> refs);
  // The back-off of a sample drafted (`verified`: its drafts were verified)
  // or asked for drafts (the proposer had none) in step `step`
  // (spec/backoff.h: waits of 1, 2, 4, ... up to backoff_cap_ steps after
  // misses -- kMaxCap while none of the sample's drafts was ever accepted,
  // unless miss_cost_budget is 0; rejected drafts wait for the
  // last multiple of the wait within it, so that the samples whose drafts keep being
  // rejected verify in the same steps).
  void note_drafts(SampleState& sample, int64_t step, bool accepted, bool verified) const;
  // After a step was collected: its time for the back-off's cost model
  // (spec_cost_; held_for_drafts: no step ran ahead of the next one because
  // it drafts), and the cap the next steps use.
  void measure_spec_cost(const LaunchedStep& step, bool held_for_drafts);
  // Right after a forward of `out` was launched, with a proposer that wants
  // them: the rows of the runner's final hidden states of each sequence whose
  // request speculates (Proposer::on_hidden_states; opted-out requests are
  // never drafted, so their rows would only fill the proposer's pool).
  void hand_hidden_states(const ScheduleOutput& out);
  // Tells the proposer of the sequences that ended since the last schedule.
  void end_sequences(const ScheduleOutput& out);
  // The verification rows of one drafted sample (RowKind::kVerify; `rows`
  // index `refs` and `so`): keeps its drafts up to the first that differs
  // from the target's sample after the token before it, then that sample
  // (Scheduler::verify_draft + append_token), and hands each kept token to
  // on_token in order, the kept drafts as TokenPlace::kKeptDraft. `step`:
  // the verification step's number. When the step after it was planned
  // ahead (assuming every draft rejected: Scheduler::resolve_verified),
  // kept drafts replace the token that step computes for the sequence, so
  // its row there is dropped (jumped_in_flight_, as for a jump).
  void verify_drafts(RequestId req, SeqId seq, std::span<const size_t> rows,
                     std::span<const RowRef> refs, const SampleOutput& so, int64_t step);
  // Records the first schedule of out's requests (queue time, cached tokens).
  void mark_scheduled(const ScheduleOutput& out);
  // Recounts the penalty counts of out's preempted sequences from the
  // scheduler's tokens (they are recomputed from scratch).
  void recount_preempted(const ScheduleOutput& out);
  // Hands the samples to the scheduler (update(), or resolve() when the next
  // step was planned ahead) and to the requests.
  // `step`: the number of the step that sampled them.
  void apply_results(const std::vector<RowRef>& refs, const SampleOutput& so, bool ahead,
                     int64_t step);
  void start_samples(RequestState& req, SeqId seq0, const std::vector<SampledRow>& tokens,
                     const SampleOutput& so);
  // One search step of a beam request over the candidates of this step's rows.
  void step_beam(RequestState& req);
  void finish_beam(RequestState& req);
  // A sampled token of a sample: constraint (and jump-forward, only at
  // TokenPlace::kLast), stop checks, detokenization, its event; may finish
  // the sample and the request.
  void on_token(RequestState& req, SampleState& sample, SeqId seq, const SampledRow& sampled,
                TokenPlace place, const SampleOutput& so);
  // Structured output went wrong for this sample (a token its constraint
  // refuses, or no token both it and allowed_token_ids allow): the sample
  // ends with an error event (finish_reason abort); under best_of the whole
  // request does. Never a crash.
  void fail_sample(RequestState& req, SampleState& sample, SeqId seq, const std::string& message);
  // Whether the samples of `req` jump forward (jump_forward.h): the engine's
  // option is on, the request is constrained, reports no logprobs (jumped
  // tokens are not sampled, so they have none) and does not rank samples by
  // them (best_of > n).
  bool jumps_forward(const RequestState& req) const;
  void emit(RequestState& req, SampleState* sample, RequestOutput&& event);
  void finish_sample(RequestState& req, SeqId seq, FinishReason reason);
  void finish_request(RequestState& req, FinishReason reason, const std::string& error = {});
  // The metrics of `req` ending now with `reason`.
  FinishedRequestStats finished_stats(const RequestState& req, FinishReason reason) const;
  // Aborts every request of `out` with `message`.
  void fail_batch(const ScheduleOutput& out, const std::string& message);
  void publish_state();
  void check_invariants();
  void report_admit_failure(RequestState& state, const std::string& message);
  // `count` requests left the never-scheduled set (num_unscheduled_).
  void on_left_unscheduled(int64_t count);

  EngineParts parts_;
  Scheduler scheduler_;
  RowPlanner planner_;
  RunAheadPolicy run_ahead_;
  // Times steps and picks the back-off cap (with a proposer only).
  SpecCostPolicy spec_cost_;
  MetricsRecorder metrics_;
  std::unique_ptr<StatsLogger>
      stats_logger_;  // with options.stats_log_interval > 0; reads metrics_
  // Structured output over the tokenizer, the eos ids and the logits'
  // vocabulary (thread-safe; caller threads compile).
  std::unique_ptr<grammar::GrammarCompiler> grammar_compiler_;

  // Shared with caller threads, under mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the engine thread
  std::condition_variable idle_cv_;  // wakes drain()
  std::deque<Command> commands_;
  std::unordered_map<std::string, RequestId> live_ids_;  // external id -> id, until the final event
  RequestId next_id_ = 1;
  mutable std::mt19937_64 rng_;
  bool stop_ = false;
  bool draining_ = false;
  bool idle_ = true;  // nothing queued, live or in flight as of the last publish_state()
  std::string invariant_error_;
  // Requests accepted by add_request and not yet scheduled for the first time
  // (queued commands included): the waiting bound of add_request. Decremented
  // when a request is first scheduled, or ends before that.
  int64_t num_unscheduled_ = 0;

  // Engine thread only.
  RequestMap requests_;
  std::optional<LaunchedStep> running_step_;  // launched, samples not applied yet
  // Sequences whose last token jump-forward replaced while running_step_
  // computes it (on_token): their rows' samples are dropped
  // (drop_jumped_rows); emptied at the end of every step().
  std::unordered_set<SeqId> jumped_in_flight_;
  // Extra rows jump-forward may still add (kJumpForwardMaxStepRows), set
  // before each collected step's tokens are applied.
  int64_t jump_rows_left_ = 0;
  int next_slot_ = 0;
  int64_t num_launched_ = 0;         // steps launched so far: the index of the next one
  // The back-off cap of samples' misses (spec_cost_'s, for the batch of the
  // last collected step).
  int32_t backoff_cap_ = SpecBackoff::kMinCap;
  // Whether a step's bucket had an r yet (metrics then show the last such step's).
  bool spec_cost_reported_ = false;
  double detokenize_seconds_ = 0.0;  // of the current step (EngineMetrics::detokenize_seconds)
  std::thread thread_;
};

}  // namespace pagoda
