// Test harness for the engine: starting an LlmEngine on a small model with
// chosen scheduler limits, collecting and checking its output events, and a
// reference model (its own ModelRunner, full recompute per token) that the
// engine's outputs are compared against.
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

// Model folders: the real stories260K (shared/) and the tiny random models
// (tests/data/models/, no tokenizer: they borrow stories260K's, same vocab).
std::string stories_dir();
std::string tiny_model_dir(const std::string& name);

struct EngineSetup {
  std::string model = {};
  std::string tokenizer = {};  // "" = the model's own
  int block_size = 16;
  int64_t num_kv_blocks = 256;
  int64_t max_num_seqs = 32;
  int64_t max_num_batched_tokens = 256;
  int32_t max_chunk_tokens = 0;  // SchedulerConfig::max_chunk_tokens
  bool prefix_caching = true;
};

// Loads and starts an engine with scheduler invariant checks after every
// step; nullptr (and a test failure) on error.
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
};

// Called on the engine thread after each event was recorded (e.g. to abort).
using EventHook = std::function<void(const RequestOutput&)>;

// Adds `r` with a sink that records into the returned log.
Result<std::shared_ptr<RequestLog>> submit(Engine& engine, const TestRequest& r,
                                           EventHook hook = {});

// Submits every request (arriving together: see the gate in run_all), waits
// until the engine is idle, and checks the contract: one final event per index, no problems, nothing running or
// waiting, no KV block in use, no scheduler invariant broken.
std::vector<std::shared_ptr<RequestLog>> run_all(LlmEngine& engine,
                                                 const std::vector<TestRequest>& requests);
void expect_idle_and_empty(LlmEngine& engine);
void expect_complete(const RequestLog& log);

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
  // min_tokens, ignore_eos and stop_token_ids are honoured. `cumulative`
  // receives the sum of the raw logprobs of the tokens.
  std::vector<int32_t> generate(std::span<const int32_t> prompt, const SamplingParams& params,
                                std::span<const int32_t> eos_ids, uint64_t seed, int32_t max_tokens,
                                double* cumulative = nullptr);

 private:
  ReferenceModel() = default;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ModelRunner> runner_;
};

// log_softmax in double.
std::vector<double> log_softmax(std::span<const float> row);
int32_t argmax(std::span<const float> row);
// 1 + the number of entries greater than row[token].
int32_t rank_of(std::span<const double> lp, int32_t token);

}  // namespace pagoda::test
