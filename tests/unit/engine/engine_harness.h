// Test harness for the engine: starting an LlmEngine on a small model with
// chosen scheduler limits, collecting and checking its output events, and a
// reference model (its own ModelRunner, full recompute per token) that the
// engine's outputs are compared against.
//
// Device contract. PAGODA_TEST_DEVICE (cpu | cuda, default cpu; anything
// else fails the binary) picks the engine's backend. The reference model is
// always the f32 CPU backend. PAGODA_SHARED_DIR / PAGODA_TEST_DATA, when set,
// replace the compiled-in input folders (a build carried to another machine).
//  - cpu: the engine and the reference run the same f32 arithmetic, so
//    tokens, ranks and top-logprob ids must be identical and logprobs agree
//    within tol::kCpuLogprob.
//  - cuda: the engine computes in bf16 (f32 checkpoints: backend_factory.h)
//    and its results depend slightly on the batch (kernel per batch size,
//    decode graphs, chunking, recompute after preemption). Every comparison
//    goes through ReferenceCheck, which allows exactly what an error of at
//    most tol::kLogprob (nats) in every log-softmax value can explain:
//      * tokens: equal up to the first difference; there the engine's token
//        must be a near-tie of the reference's (near_tie_tokens: greedy, a
//        logit gap <= kNearTie; seeded, a token the top_k/top_p filters may
//        keep whose exponential-race score, with the same Philox noise, is
//        within kNearTie / T of every surely kept token's). Every later
//        token must be the reference's own pick on the engine's prefix (same
//        seed and step) or a near-tie of it, and the engine must stop where
//        those picks stop (against a golden file, whose model is not at
//        hand, the rest is not compared). Across a ReferenceCheck at least
//        tol::kMinAgreedFraction of the reference tokens must be matched
//        before the first difference, so that the reference's own
//        continuations are what is mostly compared;
//      * logprobs within kLogprob (plus a golden's own tolerance); ranks and
//        top-k ids equal up to near-ties (the j-th largest value moves by at
//        most kLogprob);
//      * sums over L tokens (best_of cumulative logprobs, beam scores)
//        within L * kLogprob;
//      * beam search: a near-tie when beams are pruned may change every
//        later step, and then the engine's hypotheses may score better or
//        worse than transformers' (seen on an H200). So each hypothesis must
//        be a beam-search path (every token among its prefix's top 2 x
//        beam_width up to near-ties), hypotheses distinct and best first by
//        the reference's scores within the sums' tolerance; equality with
//        the golden is counted, not required.
//    Tests without a reference comparison (stop strings, cut from the greedy
//    text of the engine under test; aborts, priorities, refusals, stress)
//    are the same on both devices.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/llm_engine.h"
#include "model/model_runner.h"

namespace pagoda::test {

namespace tol {
// cpu: the engine's logprobs vs the reference's (same f32 arithmetic, other
// summation orders).
inline constexpr double kCpuLogprob = 1e-4;
// cuda: bound on |engine - reference| of any log-softmax value (nats).
// Measured on an H200 (every ReferenceCheck prints its "max |error|"):
// 13,930 logprobs of stories260K and the six tiny models, chosen tokens and
// top-k, in batches, chunks, after preemption and from the prefix cache:
// rms 0.004-0.016 for lp > -1 and 0.02-0.07 below; largest 0.194 (lp -15),
// 0.171 (lp -5), 0.167 (a tiny model, lp -2.6), 0.032 for lp > -1. bf16
// keeps 8 significant bits (relative rounding 2^-9 per value) and the error
// grows with the logits' magnitude through the layers. The bound is
// absolute, 1.5 x the largest measured error, not relative to |lp| (the tiny
// models err by 0.17 already at lp -2.6).
inline constexpr double kLogprob = 0.3;
// cuda: two tokens whose reference logits (or race scores) are this close
// may swap order: each value may move by kLogprob.
inline constexpr double kNearTie = 2 * kLogprob;
// cuda: share of the reference tokens a ReferenceCheck must see matched
// before the first divergence. Measured on an H200: 0.87-0.90 on
// stories260K, 0.45-0.82 on the near-uniform tiny random models (seeded
// draws meet near-ties early).
inline constexpr double kMinAgreedFraction = 0.25;
}  // namespace tol

// The device under test: "cpu" or "cuda" (PAGODA_TEST_DEVICE); another value
// is returned as given and fails start_engine (and the whole binary, in a
// global test environment).
const std::string& test_device();
bool on_cuda();

// Input folders: $PAGODA_SHARED_DIR / $PAGODA_TEST_DATA when set, else the
// compiled-in paths.
std::string shared_dir();
std::string test_data_dir();

// Model folders: the real stories260K (shared/) and the tiny random models
// (tests/data/models/, no tokenizer: they borrow stories260K's, same vocab).
std::string stories_dir();
std::string tiny_model_dir(const std::string& name);

struct EngineSetup {
  std::string model = {};
  std::string tokenizer = {};  // "" = the model's own
  int block_size = 16;
  int64_t num_kv_blocks = 256;        // 0: sized by kv_cache_memory_bytes
  int64_t kv_cache_memory_bytes = 0;  // EngineOptions::kv_cache_memory_bytes
  bool hybrid_kv_cache = true;        // !EngineOptions::disable_hybrid_kv_cache_manager
  int64_t max_num_seqs = 32;
  int64_t max_num_batched_tokens = 256;
  int32_t max_chunk_tokens = 0;  // SchedulerConfig::max_chunk_tokens
  bool prefix_caching = true;
  bool async_scheduling = true;  // EngineOptions::async_scheduling
  bool jump_forward = true;      // EngineOptions::jump_forward
  int64_t max_waiting_requests = 4096;
  int tensor_parallel_size = 1;    // EngineOptions::tensor_parallel_size
  int pipeline_parallel_size = 1;  // EngineOptions::pipeline_parallel_size
  // Speculative decoding: EngineOptions::speculative (a method builds its
  // proposer), or, with `proposer` set, the proposer it returns, asked for
  // speculative.num_speculative_tokens drafts per step.
  SpeculativeConfig speculative = {};
  std::function<std::unique_ptr<Proposer>()> proposer = {};
  // EngineParts::acceptance_rule (null: the exact rule).
  std::function<int32_t(std::span<const int32_t>, std::span<const int32_t>)> acceptance_rule = {};
  // EngineParts::run_ahead and its clock. Off by default here (small_batch
  // 0: every eligible step runs ahead), so that tests of the async paths
  // see them whatever the timing of their arrivals; engine_run_ahead_test
  // tests the rule.
  RunAheadPolicy::Config run_ahead = {.small_batch = 0};
  RunAheadPolicy::NowFn run_ahead_clock = {};
  // EngineParts::spec_cost_clock. Stopped by default here (no step takes
  // time, so the back-off cap stays SpecBackoff::kMinCap), so that tests of
  // speculation see the same steps whatever the host's speed;
  // engine_spec_backoff_cap_test ticks it.
  SpecCostPolicy::NowFn spec_cost_clock = [] { return SpecCostPolicy::Clock::time_point{}; };
  // Replaces EngineParts::runner with what it returns given the loaded one
  // (null: the loaded one); engine_spec_cost_timing_test times steps with it.
  std::function<std::unique_ptr<Runner>(std::unique_ptr<Runner>)> wrap_runner = {};
};

// Greedy sampling of max_tokens tokens.
SamplingParams greedy_params(int32_t max_tokens);
// Seeded sampling of max_tokens tokens: temperature 1, top_p 0.9, top_k 40.
SamplingParams seeded_params(uint64_t seed, int32_t max_tokens);

// Loads and starts an engine on test_device() with scheduler invariant
// checks after every step; nullptr (and a test failure) on error.
std::unique_ptr<LlmEngine> start_engine(const EngineSetup& setup);

// What one output index received.
struct SampleLog {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<std::string> deltas;  // text of each event
  std::vector<TokenLogprob> logprobs;
  std::optional<FinishReason> finish;
  std::variant<std::monostate, std::string, int32_t> stop_reason;
  std::string error;
  int num_finals = 0;
};

// Every event of one request, checked against the output contract as it
// arrives (violations are collected in `problems`).
struct RequestLog {
  std::string id;
  int n = 1;
  std::vector<SampleLog> samples;  // [n]
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  int num_prompt_logprob_events = 0;
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_prompt_tokens = 0;
  std::vector<std::string> problems;
  mutable std::mutex mu;

  bool done() const;  // every index has its final event
};

struct TestRequest {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams params;
  int priority = 0;
  std::shared_ptr<const CompiledConstraint> constraint = {};  // structured output
  bool speculative = true;                                    // GenerateRequest::speculative
};

// Called on the engine thread after each event was recorded (e.g. to abort).
using EventHook = std::function<void(const RequestOutput&)>;

// Adds `r` with a sink that records into the returned log.
Result<std::shared_ptr<RequestLog>> submit(Engine& engine, const TestRequest& r,
                                           EventHook hook = {});
// Adds every request in one Engine::add_requests (all or none; *failed: the
// refused one's index), each with a sink that records into its log.
Result<std::vector<std::shared_ptr<RequestLog>>> submit_batch(Engine& engine,
                                                              const std::vector<TestRequest>& rs,
                                                              size_t* failed = nullptr);

// Submits every request (arriving together: see the gate in run_all), waits
// until the engine is idle, and checks the contract: one final event per index, no problems,
// nothing running or waiting, no KV block in use, no scheduler invariant broken, consistent
// metrics.
std::vector<std::shared_ptr<RequestLog>> run_all(LlmEngine& engine,
                                                 const std::vector<TestRequest>& requests);
void expect_idle_and_empty(LlmEngine& engine);
// The metrics of an idle engine agree with each other: one observation per
// ended request in every per-request histogram, token sums equal to the
// counters, request phases within the e2e latency, one iteration_tokens
// observation per step.
void expect_consistent_metrics(const EngineMetrics& m);
void expect_complete(const RequestLog& log);

// A continuation drawn by the reference, with what is needed to judge an
// engine's differing token (ReferenceCheck).
struct RefSample {
  std::vector<int32_t> prompt;
  SamplingParams params;
  std::vector<int32_t> eos;  // stop ids unless params.ignore_eos
  uint64_t seed = 0;         // the sample seed of the draws
  int32_t max_tokens = 0;
  std::vector<int32_t> tokens;
  double cumulative = 0.0;  // sum of the raw logprobs of `tokens`
  // First step at which another token is a near-tie of the drawn one
  // (tokens.size() when none): up to here a cuda engine must agree exactly.
  size_t first_near_tie = 0;

  RefSample prefix(size_t n) const;  // the first n tokens (e.g. of an aborted request)
  // True when `token` ends the output (a stop id, or EOS unless ignore_eos)
  // once min_tokens are out.
  bool stops_on(int32_t token) const;
};

// A reference forward pass: its own backend and runner, one sequence at a
// time, every token recomputed from scratch.
class ReferenceModel {
 public:
  static std::unique_ptr<ReferenceModel> load(const std::string& model_dir);
  int64_t vocab_size() const { return runner_->config().vocab_size; }

  // [tokens.size(), V] f32: row p is the distribution of token p + 1.
  std::vector<float> logits(std::span<const int32_t> tokens);
  std::vector<float> next_logits(std::span<const int32_t> tokens);
  // The backend's draw (seed, step) from `logits` with temperature/top_k/top_p.
  int32_t draw(std::span<const float> logits, float temperature, int32_t top_k, float top_p,
               uint64_t seed, uint64_t step);

  // `max_tokens` tokens after `prompt` (fewer when a stop or EOS id comes
  // after min_tokens): greedy when params say so (lowest id on ties), else
  // seeded draws with sample seed `seed`. Only temperature, top_k, top_p,
  // min_tokens, ignore_eos and stop_token_ids are honoured.
  RefSample sample(std::span<const int32_t> prompt, const SamplingParams& params,
                   std::span<const int32_t> eos_ids, uint64_t seed, int32_t max_tokens);
  // sample()'s tokens; `cumulative` receives the sum of their raw logprobs.
  std::vector<int32_t> generate(std::span<const int32_t> prompt, const SamplingParams& params,
                                std::span<const int32_t> eos_ids, uint64_t seed, int32_t max_tokens,
                                double* cumulative = nullptr);

  // The sampler's pick on a row `x` of sampler_input: greedy (lowest id on
  // ties) or the seeded draw of `step`.
  int32_t choose(std::span<const float> x, const SamplingParams& params, uint64_t seed,
                 uint64_t step);
  // What the sampler of step `step` of `s` sees: the logits after `context`
  // (prompt + the first `step` tokens), stop ids banned before min_tokens.
  std::vector<float> sampler_input(const RefSample& s, std::span<const int32_t> context,
                                   size_t step);
  // Sum of the raw logprobs of `tokens` after `prompt` (teacher forced).
  double cumulative_logprob(std::span<const int32_t> prompt, std::span<const int32_t> tokens);

 private:
  ReferenceModel() = default;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ModelRunner> runner_;
};

// [V] flags: the tokens other than `chosen` (the sampler's pick on `x`, a
// row of sampler_input) that it could pick if every logit moved by at most
// `eps`: greedy, those within 2 eps of the maximum; seeded (temperature T,
// top_k, top_p, noise philox_uniform(seed, step, t)), those the filters may
// keep whose race score x/T - log(-log u) is within 2 eps / T of every other
// token the filters surely keep. An over-approximation: a token outside the
// set cannot be picked under such an error.
std::vector<char> near_tie_tokens(std::span<const float> x, const SamplingParams& params,
                                  uint64_t seed, uint64_t step, double eps, int32_t chosen);

// Compares engine outputs with the reference by the device contract above
// (reference_check.cpp):
// exactly on cpu, up to bf16 near-ties on cuda. On cuda the destructor
// requires that at least tol::kMinAgreedFraction of the compared reference
// tokens were matched, and prints what it saw (agreement, tokens pinned
// before the reference's first near-tie, divergences at near-ties, the
// largest logprob error, beam agreement with the golden).
class ReferenceCheck {
 public:
  explicit ReferenceCheck(ReferenceModel* ref, std::string name = {});
  ~ReferenceCheck();
  ReferenceCheck(const ReferenceCheck&) = delete;
  ReferenceCheck& operator=(const ReferenceCheck&) = delete;

  // The engine's tokens against a reference sample. Returns how many
  // leading tokens agree (all of them when the check passes on cpu).
  size_t expect_tokens(std::span<const int32_t> got, const RefSample& want,
                       const std::string& what);
  // Greedy tokens against a golden continuation whose log-softmax rows are
  // known at each step (rows[i]: [V], NaN for entries not listed, which
  // count as below every listed one).
  size_t expect_greedy_tokens(std::span<const int32_t> got, std::span<const int32_t> want,
                              const std::vector<std::vector<double>>& rows, const std::string& what,
                              double ref_tol = 0.0);
  // A reported logprob entry for `token` against its reference log-softmax
  // row `lp` ([V], NaN as above) with `num_top` top entries. `ref_tol`: the
  // reference's own tolerance (golden files); on cpu the tolerance.
  void expect_logprob(const TokenLogprob& got, int32_t token, std::span<const double> lp,
                      size_t num_top, const std::string& where, double ref_tol = tol::kCpuLogprob);
  // best_of: the engine returned `got` (best first) out of the samples the
  // reference drew in `candidates` (one per sample seed). cpu: exactly the
  // highest-cumulative candidates in order. cuda: each returned sample is a
  // distinct candidate (up to near-ties), in descending order and above every
  // candidate the engine must have drawn exactly (no near-tie on its path),
  // both within the sequences' L * kLogprob.
  void expect_best_of(std::span<const std::vector<int32_t>> got,
                      std::span<const RefSample> candidates, const std::string& what);
  // The engine's beam hypotheses (best first) against the golden's. cpu:
  // equal. cuda: each a beam-search path of the reference up to near-ties
  // (every token among the top 2 x beam_width of its prefix), distinct, and
  // best first by the reference's score (sum logprob / len^length_penalty)
  // within len * kLogprob / len^length_penalty each; agreement with the
  // golden is counted (a near-tie in pruning may change later steps).
  void expect_beams(std::span<const int32_t> prompt, const std::vector<std::vector<int32_t>>& got,
                    const std::vector<std::vector<int32_t>>& want, int32_t beam_width,
                    double length_penalty, const std::string& what);

 private:
  struct Comparison {
    size_t agreed = 0;      // leading tokens equal
    bool ok = false;        // equal, or (cuda) differing first at a near-tie
    bool diverged = false;  // ok through a near-tie
  };
  // `near_tie(i, t)`: may the engine pick t at position i (cuda only).
  Comparison compare(std::span<const int32_t> got, std::span<const int32_t> want,
                     const std::function<bool(size_t, int32_t)>& near_tie, bool report,
                     const std::string& what);
  bool near_tie_at(const RefSample& want, size_t step, int32_t token);
  // cuda, after `got` left `want` at a near-tie at `from`: every later token
  // is the reference's pick on got's own prefix or a near-tie of it, and
  // got stops where those picks stop.
  bool follows(std::span<const int32_t> got, const RefSample& want, size_t from, bool report,
               const std::string& what);
  void tally(const Comparison& c, size_t num_reference);

  ReferenceModel* ref_;
  std::string name_;
  size_t num_compared_ = 0;  // reference tokens compared
  size_t num_agreed_ = 0;    // of which matched
  size_t num_pinned_ = 0;    // of which before the reference's first near-tie
  size_t num_near_tie_divergences_ = 0;
  size_t num_logprobs_ = 0;
  double max_logprob_error_ = 0.0;
  size_t num_selection_checks_ = 0;  // best_of: left-out candidates compared
  size_t num_beam_hypotheses_ = 0;
  size_t num_beam_tokens_ = 0;  // golden hypothesis tokens, and those the engine matched
  size_t num_beam_tokens_agreed_ = 0;
};

// log_softmax in double.
std::vector<double> log_softmax(std::span<const float> row);
int32_t argmax(std::span<const float> row);
// 1 + the number of entries greater than row[token].
int32_t rank_of(std::span<const double> lp, int32_t token);

}  // namespace pagoda::test
