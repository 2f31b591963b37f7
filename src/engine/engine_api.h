// The engine's public contract: requests in, per-request output events out.
// The server and the CLI use only this header (and the protocol types it
// names); everything behind it runs on the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.h"
#include "jinja/chat_template.h"
#include "sample/sampling_params.h"
#include "sample/structured_output.h"
#include "sample/token_constraint.h"
#include "spec/spec_config.h"

namespace pagoda {

class Tokenizer;

// Flags shared by `pagoda generate`, `serve` and `bench` (names follow vLLM).
struct EngineOptions {
  std::string model;              // folder, .gguf file, or HF repo id (cache, else downloaded)
  std::string revision;           // of a repo id (--revision); empty: main
  std::string download_dir;       // hub cache root (--download-dir); empty: HF_HUB_CACHE / HF_HOME
  std::string served_model_name;  // default: the model's folder/file name
  std::string device = "auto";    // "cpu" | "cuda" | "auto" (cuda when a GPU is present)
  // Where the weights come from (engine/load_format.h): "auto" the model's
  // files, "dummy" random weights of its shapes (only config.json and the
  // tokenizer read; for benchmarks and tests of shapes, outputs meaningless).
  std::string load_format = "auto";
  // --gguf-dequantize: a GGUF model's quantized linear weights (and an AWQ /
  // GPTQ checkpoint's quantized modules) are
  // dequantized to the compute dtype at load (bf16 on cuda) instead of staying
  // in their blocks (RunnerOptions::keep_weight_blocks).
  bool gguf_dequantize = false;
  // --quantization: "fp8" quantises a f32/f16/bf16 checkpoint's layer linear
  // weights at load (io/quantization_config.h, online_fp8_config); an FP8
  // checkpoint keeps its own scheme. Empty: the checkpoint as it is.
  std::string quantization;
  // Overrides the model's default chat template: a file, a name of the
  // model's templates, or the template itself (engine/chat_template_source.h).
  std::string chat_template;
  // Sampling defaults (io/generation_defaults.h): "auto" the model's own,
  // "vllm" none, else a folder holding a generation_config.json.
  std::string generation_config = "auto";
  int block_size = 16;
  // The KV cache's element type (--kv-cache-dtype, core/kv_cache_dtype.h):
  // auto (the compute dtype), bf16, fp16, fp8 / fp8_e4m3 (e4m3 with the
  // checkpoint's k/v scales, else 1.0).
  std::string kv_cache_dtype = "auto";
  int64_t num_kv_blocks = 0;  // 0: size the pool from memory (the full-attention group's)
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  bool enable_prefix_caching = true;
  int64_t max_waiting_requests = 4096;
  double gpu_memory_utilization = 0.9;
  // KV cache bytes (--kv-cache-memory-bytes); 0: cpu sizes the pool for
  // max_num_seqs sequences of max_model_len tokens within half the available
  // RAM, cuda from gpu_memory_utilization (model/kv_budget.h).
  int64_t kv_cache_memory_bytes = 0;
  bool enforce_eager = false;
  // `pagoda bench latency --profile-ops`: the runner's backend is wrapped in
  // a ProfilingBackend (backend/profiling_backend.h), EngineParts::backend
  // is that wrapper. One device only (no tensor or pipeline parallelism).
  bool profile_ops = false;
  // --disable-hybrid-kv-cache-manager (vLLM's name): every layer keeps its
  // whole context in one KV pool. Off (default): a model with both
  // sliding-window and full-attention layers (Gemma 2/3) keeps the sliding
  // layers' KV in a second pool that holds only the window
  // (RunnerOptions::sliding_kv_group, docs/architecture.md "KV groups").
  bool disable_hybrid_kv_cache_manager = false;
  // Tensor parallelism (docs/parallelism.md): the model split over this many
  // ranks (--tensor-parallel-size) -- cpu: threads of this process, cuda:
  // GPUs 0..N-1 over NCCL. 1: the whole model on one backend.
  int tensor_parallel_size = 1;
  // Pipeline parallelism (--pipeline-parallel-size, docs/parallelism.md):
  // the layers split into this many stages, each of tensor_parallel_size
  // ranks (tp x pp ranks in all; cuda: GPUs 0..tp*pp-1). M > 1 turns
  // async_scheduling off (logged).
  int pipeline_parallel_size = 1;
  // Plan and launch step N+1 while the device runs step N (steps whose
  // requests need step N's tokens first -- beam search, the fork of n > 1,
  // repetition/presence/frequency penalties -- wait; so do small steps
  // shortly after a request arrived while steps ran: engine/run_ahead_policy.h).
  bool async_scheduling = true;
  // Structured output: where the constraint admits a single continuation,
  // append its tokens without sampling them (engine/jump_forward.h).
  bool jump_forward = true;
  // Speculative decoding (--speculative-config, docs/speculative-decoding.md):
  // off unless a method is set. num_speculative_tokens > 0 also sizes the
  // runner's verification graphs (model/verify_graphs.h), with a method or
  // for a proposer the caller puts into EngineParts (bench, tests).
  SpeculativeConfig speculative;
  uint64_t seed = 0;  // base for requests without a seed (0: random per process)
  // Seconds between engine stats lines in the log (engine/stats_logger.h),
  // written only while the engine is busy; 0: none.
  double stats_log_interval = 0.0;
};

enum class FinishReason { kStop, kLength, kAbort };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort"

struct TopLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// Logprob information of one token (generated or prompt).
struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  int32_t rank = 0;             // 1 = most likely
  std::vector<TopLogprob> top;  // the requested number of most likely tokens, descending
};

// One output event of one sample (index) of a request. Events for the same
// (request, index) arrive in order; the last one carries finish_reason.
struct RequestOutput {
  std::string request_id;
  int index = 0;                       // sample index in [0, n); beam search: hypothesis rank
  std::vector<int32_t> token_ids;      // tokens generated since the previous event of this index
  std::string text;                    // text since the previous event (stop strings held back)
  std::vector<TokenLogprob> logprobs;  // one per token in token_ids when logprobs requested
  std::optional<FinishReason> finish_reason;
  std::variant<std::monostate, std::string, int32_t>
      stop_reason;  // matched stop string or token id
  int64_t num_prompt_tokens = 0;
  int64_t num_output_tokens = 0;         // of this index so far
  int64_t num_cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
  // Only in the first event of index 0 when prompt_logprobs requested:
  // one entry per prompt token (the first is nullopt: nothing predicts it).
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  // Non-empty when the request failed inside the engine (finish_reason is
  // kAbort): a message for logs and a 500 response.
  std::string error;
};

// Receives the events of one request. Called on the engine thread: it must
// return quickly and never block (hand the event to another thread).
using OutputSink = std::function<void(RequestOutput&&)>;

struct GenerateRequest {
  std::string request_id;  // unique among live requests
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;
  int priority = 0;  // lower runs first; FCFS within a level
  OutputSink sink;
  // Structured output: every sample's tokens follow this constraint (from
  // Engine::compile_constraint); null: unconstrained.
  std::shared_ptr<const CompiledConstraint> constraint;
  // Speculative decoding (EngineOptions::speculative): false keeps this
  // request out of it. Outputs are the same either way; only speed differs.
  bool speculative = true;
};

struct ModelInfo {
  std::string served_model_name;
  std::string architecture;
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  int64_t num_kv_blocks = 0;  // the full-attention group's pool with two KV groups
  int block_size = 0;
  int64_t kv_capacity_tokens = 0;  // num_kv_blocks * block_size
  std::string kv_cache_dtype;      // the cache's element type: "fp8_e4m3", "bf16", "fp16", "f32"
  // The sliding-window KV group (0 without one): its pool, its window, and
  // the most new tokens of one step (bounds its blocks per sequence:
  // kv/sliding_window_blocks.h).
  int64_t num_sliding_kv_blocks = 0;
  int64_t sliding_window = 0;
  int64_t max_num_batched_tokens = 0;
  int64_t max_num_seqs = 0;        // sequences running at once (--max-num-seqs)
  std::string device;              // e.g. "cpu (2 threads)"; with tensor parallelism rank 0's
  // The linear layers' precision: the compute dtype ("bf16") or
  // describe_quantization()'s "fp8 (w8a8, dynamic per-token; ...)".
  std::string weight_precision;
  int tensor_parallel_size = 1;    // ranks the model is split over (--tensor-parallel-size)
  int pipeline_parallel_size = 1;  // stages the layers are split into (--pipeline-parallel-size)
  // Speculative decoding's method ("" when off) and tokens drafted per step.
  std::string speculative_method;
  int32_t num_speculative_tokens = 0;
};

// A snapshot of counters and histograms for /metrics. Histograms hold
// cumulative counts per upper bound (seconds or tokens) plus sum and count.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // counts[i]: observations <= bounds[i]; same size as bounds
  double sum = 0.0;
  uint64_t count = 0;
};

// Engine steps that ran the model: how many, their wall time on the engine
// thread and the part of it spent blocked on the device (waiting for sampled
// ids); seconds - device_wait_seconds is the host work per step that the
// device does not overlap.
struct StepTimes {
  uint64_t steps = 0;
  double seconds = 0.0;
  double device_wait_seconds = 0.0;

  void add(double step_seconds, double wait_seconds) {
    ++steps;
    seconds += step_seconds;
    device_wait_seconds += wait_seconds;
  }
  // These steps less `part` (an earlier snapshot, or a subset of them).
  StepTimes minus(const StepTimes& part) const {
    return {steps - part.steps, seconds - part.seconds,
            device_wait_seconds - part.device_wait_seconds};
  }
};

struct EngineMetrics {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  uint64_t finished_stop = 0, finished_length = 0, finished_abort = 0;
  uint64_t prompt_tokens = 0;  // prompt tokens of requests whose prefill finished (first token out)
  uint64_t generation_tokens = 0;
  uint64_t num_preemptions = 0;
  double kv_usage = 0.0;              // fraction of KV blocks in use
  uint64_t prefix_cache_queries = 0;  // tokens looked up
  uint64_t prefix_cache_hits = 0;     // tokens found
  StepTimes steps;                    // every step that ran the model
  StepTimes graph_steps;              // the subset that replayed a decode or verification graph
  // Steps whose every sequence had one new token: the shape a decode graph
  // replays, counted on every backend (the others, prefill chunks and
  // jump-forward's multi-token rows, run eagerly unless a verification graph
  // fits them).
  uint64_t decode_only_steps = 0;
  // Steps during whose device time the next step was planned and launched
  // (async scheduling); the others waited for their samples first.
  uint64_t overlapped_steps = 0;
  // Steps that could have been overlapped so but whose next step the
  // adaptive rule planned after their samples instead: a small batch shortly
  // after a request arrived while steps ran (engine/run_ahead_policy.h).
  uint64_t held_steps = 0;
  // Part of steps.seconds spent turning sampled tokens into text: incremental
  // detokenization and stop checks (strings, tokens, lengths) of every sample.
  double detokenize_seconds = 0.0;

  // Latencies in seconds, with vLLM's buckets (engine/histogram.h).
  // Observed at each first token / each later token of a sample:
  Histogram time_to_first_token;  // arrival -> first token of the request
  Histogram inter_token_latency;  // between consecutive tokens of one sample
  // Observed once per finished request (aborted ones included), from its
  // timestamps: arrival, first scheduled, first token, last token, finished.
  // A phase the request never reached ends at its finish.
  Histogram e2e_latency;                    // arrival -> finished
  Histogram queue_time;                     // arrival -> first scheduled
  Histogram prefill_time;                   // first scheduled -> first token
  Histogram decode_time;                    // first token -> last token
  Histogram inference_time;                 // first scheduled -> last token
  Histogram request_time_per_output_token;  // decode_time / (longest sample's tokens - 1); 0 for <=
                                            // 1 token
  // Token counts per finished request (1-2-5 buckets up to max_model_len):
  Histogram request_prompt_tokens;
  Histogram request_generation_tokens;        // over all its samples
  Histogram request_max_generation_tokens;    // its longest sample
  Histogram request_prefill_computed_tokens;  // prompt tokens not served by the prefix cache
  Histogram request_params_n;
  Histogram
      request_params_max_tokens;  // the resolved per-sample cap (unset: what the context leaves)
  // Tokens each engine step ran through the model (prefill chunks + decodes).
  Histogram iteration_tokens;

  // Speculative decoding (vLLM's spec_decode counters): verifications of a
  // drafted sequence, tokens drafted and accepted over them, and how often
  // the draft at position j (0-based) was accepted
  // ([num_speculative_tokens]; empty when speculation is off).
  uint64_t spec_num_drafts = 0;
  uint64_t spec_num_draft_tokens = 0;
  uint64_t spec_num_accepted_tokens = 0;
  std::vector<uint64_t> spec_accepted_per_position;
  // The back-off cap (spec/backoff.h): the most steps a sample whose drafts
  // keep missing waits (engine/spec_cost_policy.h), of the last step whose
  // batch-size bucket had a measured r (before one: of the last step); 0
  // before the first step and when speculation is off.
  int32_t spec_backoff_cap = 0;
  // r, the measured extra cost, in plain steps, of a step (window) in which
  // every sequence verifies, of that step's bucket (SpecCostPolicy::extra_cost),
  // from which the cap is picked; empty until a bucket had one.
  std::optional<double> spec_verify_extra_cost;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Queues a request. Errors: kInvalidArgument (bad params, an empty prompt,
  // or a request beyond the limits of engine/request_fit.h's fit_request,
  // with its text; the message names the field), kResourceExhausted (max waiting
  // requests, counted exactly: accepted and not yet scheduled for the first
  // time). An accepted request is never refused later for capacity: it
  // finishes normally unless aborted or failed inside the engine (then its
  // events carry `error`). Thread-safe.
  virtual Status add_request(GenerateRequest request) = 0;
  // Queues several requests, all or none: each is checked as add_request
  // checks it (and the batch against the waiting bound as a whole); on the
  // first refusal nothing is queued, the error is that request's, and
  // *failed (when given) is its index. LlmEngine queues an accepted batch
  // under one lock, so its engine thread takes the requests together into
  // the same step: an offline batch's first step, and so its numerics, do
  // not depend on how fast the caller submitted. The default adds them one
  // by one, aborting the added ones on a refusal (no such guarantee).
  // Thread-safe.
  virtual Status add_requests(std::vector<GenerateRequest> requests, size_t* failed = nullptr);
  // Aborts a live request (no-op if unknown or finished); its KV is freed at
  // once and its sink gets a final event with FinishReason::kAbort. Thread-safe.
  virtual void abort(const std::string& request_id) = 0;

  // Thread-safe helpers for frontends.
  virtual const Tokenizer& tokenizer() const = 0;
  virtual bool has_chat_template() const = 0;
  virtual Result<std::string> apply_chat_template(const ChatTemplateInputs& inputs) const = 0;
  virtual const ModelInfo& info() const = 0;
  virtual EngineMetrics metrics() const = 0;
  // Compiles a structured-output spec against the model's vocabulary (cached:
  // the same spec returns the same constraint). Errors: kInvalidArgument
  // naming the bad keyword or position of the schema, regex or grammar.
  // Thread-safe.
  virtual Result<std::shared_ptr<const CompiledConstraint>> compile_constraint(
      const StructuredOutputSpec& spec) const = 0;

  // Stops accepting requests, finishes the ones in flight, then stops the
  // engine thread. Returns when done.
  virtual void drain() = 0;
};

// Loads the model, tokenizer and chat template, sizes the KV pool and starts
// the engine thread.
Result<std::unique_ptr<Engine>> create_engine(const EngineOptions& options);

}  // namespace pagoda
