// A deterministic stand-in for the engine, for server tests: it implements the
// Engine contract (queue limits, abort, drain, events per token, metrics) with
// a "model" whose output follows simple rules instead of weights:
// - a prompt whose text contains "SAY:" answers the rest of that line (leading
//   spaces dropped) exactly, then EOS;
// - otherwise it writes pseudo-random words, a function of the prompt, the
//   sample's seed (fixed when temperature is 0) and the position, and ends with
//   EOS after 6..13 words;
// - a prompt whose text contains "FAIL:" fails inside the "engine" at its
//   first step: every sample gets a final kAbort event whose `error` is the
//   rest of that line (as LlmEngine reports a failed model step);
// - a prompt whose text contains "CONSTRAINT?" answers the request's
//   structured-output constraint as one line of JSON, {"kind", "text",
//   "choices"?} (kind null: none), so server tests see what reached the
//   engine; constraints are compiled (compile_constraint, recorded) but not
//   enforced, except that a spec whose text or choices contain
//   "REFUSE_CONSTRAINT" is refused (kInvalidArgument, naming its position);
// - stop strings (held back while they may still match), stop_token_ids,
//   ignore_eos, min_tokens, max_tokens, n, logprobs (fake but consistent
//   values) and prompt_logprobs behave as the real engine's contract says.
// One engine step (one token for every running sample) takes `step_time`.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_api.h"
#include "grammar/compiler.h"
#include "jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::testing {

struct Sample;  // one sample of a request (implementation detail)

inline constexpr const char* kShowConstraint = "CONSTRAINT?";
inline constexpr const char* kRefusedConstraintMarker = "REFUSE_CONSTRAINT";

// The "CONSTRAINT?" answer for `request` (see above).
std::string describe_constraint(const GenerateRequest& request);

struct FakeEngineOptions {
  std::string tokenizer_path;      // a tokenizer folder, e.g. stories260K
  std::string chat_template_file;  // "" → no chat template
  std::string served_model_name = "fake-model";
  int64_t max_model_len = 512;
  int64_t max_num_seqs = 64;  // requests running at once
  // Requests accepted and not yet running; more → kResourceExhausted. Exact
  // (counted under the lock), as LlmEngine's bound.
  int64_t max_waiting = 256;
  bool scripted_failures = true;  // the "FAIL:" rule; the request fuzzer turns it off
  std::chrono::microseconds step_time{1000};
};

class FakeEngine : public Engine {
 public:
  static Result<std::unique_ptr<FakeEngine>> create(const FakeEngineOptions& options);
  ~FakeEngine() override;

  Status add_request(GenerateRequest request) override;
  void abort(const std::string& request_id) override;
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  bool has_chat_template() const override { return chat_template_.has_value(); }
  Result<std::string> apply_chat_template(const ChatTemplateInputs& inputs) const override;
  const ModelInfo& info() const override { return info_; }
  EngineMetrics metrics() const override;
  Result<std::shared_ptr<const CompiledConstraint>> compile_constraint(
      const StructuredOutputSpec& spec) const override;
  void drain() override;

  // Test hooks.
  std::vector<std::string> aborted_ids() const;  // requests aborted while live
  int64_t num_live() const;                      // waiting + running
  // Every spec compile_constraint was asked for, in order.
  std::vector<StructuredOutputSpec> compiled_specs() const;
  // The words a sample would produce: the rule the fake follows, exposed so
  // tests can predict outputs independently of the server.
  std::vector<int32_t> word_ids() const { return word_ids_; }

  struct Live;  // one request (implementation detail)
  FakeEngine(const FakeEngineOptions& options, std::unique_ptr<Tokenizer> tokenizer,
             std::optional<ChatTemplate> chat_template);

 private:
  using Event = std::pair<std::shared_ptr<Live>, RequestOutput>;
  void loop();
  void process_aborts_locked(std::vector<Event>& events);
  void admit_locked();
  void step_locked(std::vector<Event>& events);
  void advance_locked(Live& live, Sample& sample, std::vector<Event>& events,
                      const std::shared_ptr<Live>& owner);
  // The "FAIL:" rule: every sample ends with an error event.
  void fail_locked(Live& live, std::vector<Event>& events, const std::shared_ptr<Live>& owner);
  int32_t next_token(const Live& live, const Sample& sample) const;
  TokenLogprob fake_logprob(int32_t token, uint64_t salt, int num_top) const;

  FakeEngineOptions options_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  ModelInfo info_;
  std::vector<int32_t> word_ids_;  // plain-word tokens the fake writes

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Live>> waiting_;
  std::vector<std::shared_ptr<Live>> running_;
  std::vector<std::vector<int32_t>> recent_prompts_;  // for cached-token counts
  std::vector<std::string> pending_aborts_;
  std::vector<std::string> aborted_;
  mutable std::vector<StructuredOutputSpec> compiled_specs_;
  // The real compiler over the fake's vocabulary: specs it refuses are
  // refused with its message, as by the engine (what compiles is then
  // answered with a FakeCompiledConstraint: the fake does not enforce it).
  std::unique_ptr<grammar::GrammarCompiler> grammar_compiler_;
  EngineMetrics metrics_;
  bool draining_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace pagoda::testing
