#include "engine/llm_engine.h"

#include <fmt/format.h>

#include <string_view>
#include <unordered_set>
#include <utility>

#include "core/log.h"
#include "engine/request_fit.h"
#include "grammar/compiler.h"
#include "sample/sampling_rows.h"
#include "sample/token_mask.h"

namespace pagoda {

Result<std::unique_ptr<LlmEngine>> LlmEngine::start(EngineParts parts) {
  PAGODA_ASSIGN_OR_RETURN(Scheduler scheduler, Scheduler::create(parts.scheduler_config));
  std::unique_ptr<LlmEngine> engine(new LlmEngine(std::move(parts), std::move(scheduler)));
  const EngineParts& p = engine->parts_;
  PAGODA_ASSIGN_OR_RETURN(
      auto vocab, grammar::GrammarVocabulary::from_tokenizer(
                      *p.tokenizer, p.eos_token_ids, static_cast<int32_t>(p.info.vocab_size)));
  engine->grammar_compiler_ = std::make_unique<grammar::GrammarCompiler>(std::move(vocab));
  engine->thread_ = std::thread([e = engine.get()] { e->loop(); });
  if (const double interval = engine->parts_.options.stats_log_interval; interval > 0.0) {
    engine->stats_logger_ =
        std::make_unique<StatsLogger>([e = engine.get()] { return e->metrics_.snapshot(); },
                                      std::chrono::duration<double>(interval));
  }
  return engine;
}

LlmEngine::LlmEngine(EngineParts parts, Scheduler scheduler)
    : parts_(std::move(parts)),
      scheduler_(std::move(scheduler)),
      planner_(parts_.eos_token_ids, parts_.info.vocab_size),
      run_ahead_(parts_.run_ahead, parts_.run_ahead_clock),
      spec_cost_(parts_.options.speculative.miss_cost_budget, parts_.spec_cost_clock),
      metrics_(parts_.info.max_model_len,
               parts_.proposer ? parts_.options.speculative.num_speculative_tokens : 0) {
  uint64_t seed = parts_.options.seed ? parts_.options.seed : std::random_device{}();
  rng_.seed(seed);
}

LlmEngine::~LlmEngine() {
  stats_logger_.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::string> LlmEngine::apply_chat_template(const ChatTemplateInputs& inputs) const {
  if (!parts_.chat_template) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "this model has no chat template; start the server with --chat-template FILE");
  }
  ChatTemplateInputs filled = inputs;
  if (filled.bos_token.empty()) filled.bos_token = parts_.tokenizer->bos_token();
  if (filled.eos_token.empty()) filled.eos_token = parts_.tokenizer->eos_token();
  return parts_.chat_template->render(filled);
}

Status LlmEngine::prepare(const GenerateRequest& request, RequestState& state) const {
  auto invalid = [](std::string m) {
    return make_error(ErrorCode::kInvalidArgument, std::move(m));
  };
  if (request.request_id.empty()) return invalid("request_id must not be empty");
  if (!request.sink) return invalid("request has no output sink");
  const int64_t vocab = parts_.info.vocab_size;
  const auto num_prompt = static_cast<int64_t>(request.prompt_token_ids.size());
  if (num_prompt == 0) return invalid("the prompt is empty");
  for (int32_t id : request.prompt_token_ids) {
    if (id < 0 || id >= vocab)
      return invalid(
          fmt::format("prompt token id {} is outside the vocabulary [0, {})", id, vocab));
  }
  state.params = request.params;
  state.params.apply_defaults(parts_.generation);
  PAGODA_RETURN_IF_ERROR(state.params.validate(static_cast<int32_t>(vocab)));
  if (request.constraint && state.params.use_beam_search) {
    // Beam search ranks raw continuations; a per-beam constraint state is not built.
    return invalid("structured output cannot be combined with beam search (use_beam_search)");
  }
  state.constraint = request.constraint;
  state.speculates =
      parts_.proposer != nullptr && request.speculative && !state.params.use_beam_search;
  if (!state.params.allowed_token_ids.empty())
    state.allowed_mask = pack_token_mask(state.params.allowed_token_ids, vocab);
  state.num_seqs = state.params.num_seqs();
  // The limits, as frontends check them before submitting; unset, max_tokens
  // is what the context leaves.
  auto max_tokens = fit_request(parts_.info, {.num_prompt_tokens = num_prompt,
                                              .max_tokens = state.params.max_tokens,
                                              .num_seqs = state.num_seqs});
  if (!max_tokens.ok()) return invalid(max_tokens.error().message);
  state.max_tokens = static_cast<int32_t>(max_tokens.value());
  state.external_id = request.request_id;
  state.sink = request.sink;
  state.prompt = request.prompt_token_ids;
  state.arrival = Clock::now();
  return Status::Ok();
}

Status LlmEngine::add_request(GenerateRequest request) {
  std::vector<GenerateRequest> one;
  one.push_back(std::move(request));
  return add_requests(std::move(one));
}

Status LlmEngine::add_requests(std::vector<GenerateRequest> requests, size_t* failed) {
  auto refuse = [&](size_t i, Error e) -> Status {
    if (failed != nullptr) *failed = i;
    return e;
  };
  if (requests.empty()) return Status::Ok();
  std::vector<std::unique_ptr<RequestState>> states;
  states.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto state = std::make_unique<RequestState>();
    if (Status st = prepare(requests[i], *state); !st.ok()) return refuse(i, st.error());
    state->priority = requests[i].priority;
    state->prompt_logprobs = PromptLogprobs(state->params.prompt_logprobs, state->prompt.size());
    states.push_back(std::move(state));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || stop_)
      return refuse(0, Error{ErrorCode::kResourceExhausted, "the engine is shutting down"});
    std::unordered_set<std::string_view> batch_ids;  // the ids of states[0, i)
    for (size_t i = 0; i < states.size(); ++i) {
      const int64_t waiting = num_unscheduled_ + static_cast<int64_t>(i);
      if (waiting >= parts_.options.max_waiting_requests) {
        return refuse(i, Error{ErrorCode::kResourceExhausted,
                               fmt::format("the waiting queue is full ({} requests); retry later",
                                           waiting)});
      }
      const std::string& id = states[i]->external_id;
      if (live_ids_.contains(id) || !batch_ids.insert(id).second) {
        return refuse(i, Error{ErrorCode::kInvalidArgument,
                               fmt::format("request id '{}' is already in use", id)});
      }
    }
    for (std::unique_ptr<RequestState>& state : states) {
      state->id = next_id_++;
      state->seed = state->params.seed ? *state->params.seed : rng_();
      live_ids_.emplace(state->external_id, state->id);
      ++num_unscheduled_;
      Command c;
      c.add = std::move(state);
      commands_.push_back(std::move(c));
    }
    idle_ = false;
  }
  cv_.notify_one();
  return Status::Ok();
}

void LlmEngine::abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!live_ids_.contains(request_id)) return;
    Command c;
    c.abort_id = request_id;
    commands_.push_back(std::move(c));
  }
  cv_.notify_one();
}

void LlmEngine::drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
  }
  wait_idle();
}

void LlmEngine::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return idle_ && commands_.empty(); });
}

bool LlmEngine::wait_idle_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [this] { return idle_ && commands_.empty(); });
}

std::string LlmEngine::invariant_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return invariant_error_;
}

void LlmEngine::loop() {
  for (;;) {
    std::deque<Command> commands;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] {
        return stop_ || !commands_.empty() || scheduler_.has_unfinished() ||
               running_step_.has_value();
      });
      if (stop_) return;
      commands.swap(commands_);
    }
    apply_commands(commands);
    if (scheduler_.has_unfinished() || running_step_) step();
    if (parts_.check_invariants) check_invariants();
    publish_state();
  }
}

void LlmEngine::apply_commands(std::deque<Command>& commands) {
  // Requests that find steps to run arrive "busy" (RunAheadPolicy); those
  // taken together with the first of an idle engine do not.
  const bool busy = scheduler_.has_unfinished() || running_step_.has_value();
  for (Command& c : commands) {
    if (c.add) {
      if (busy) run_ahead_.on_busy_arrival();
      admit(std::move(c.add));
    } else {
      abort_now(c.abort_id);
    }
  }
}

void LlmEngine::admit(std::unique_ptr<RequestState> state) {
  RequestSpec spec;
  spec.id = state->id;
  spec.prompt_tokens = state->prompt;
  spec.priority = state->priority;
  spec.num_seqs = state->num_seqs;
  spec.max_new_tokens = state->max_tokens;
  spec.use_prefix_cache = !state->prompt_logprobs.wanted();
  Result<SeqId> seq = scheduler_.add_request(std::move(spec));
  if (!seq.ok()) {
    report_admit_failure(*state, seq.error().message);
    return;
  }
  RequestState& req = *state;
  req.index_reported.assign(static_cast<size_t>(req.params.n), false);
  if (req.params.use_beam_search) {
    BeamSearchConfig bc;
    bc.beam_width = req.params.beam_width;
    bc.num_return = req.params.n;
    bc.length_penalty = req.params.length_penalty;
    bc.early_stopping = req.params.early_stopping;
    bc.max_new_tokens = req.max_tokens;
    bc.eos_token_ids = req.params.ignore_eos ? std::vector<int32_t>{} : parts_.eos_token_ids;
    req.beam = std::make_unique<BeamRequest>(bc, *seq);
  } else {
    auto sample = std::make_unique<SampleState>(0, *parts_.tokenizer, req.params,
                                                parts_.eos_token_ids, req.max_tokens, req.prompt);
    if (req.constraint) sample->constraint = req.constraint->start();
    req.samples.emplace(*seq, std::move(sample));
  }
  requests_.emplace(req.id, std::move(state));
}

// The scheduler refused the request: an internal error, since prepare()'s
// request check guarantees its preconditions and its queue is never full
// (see engine_factory.cpp). Every index gets its final event.
void LlmEngine::report_admit_failure(RequestState& state, const std::string& message) {
  log_error("request {}: {}", state.external_id, message);
  for (int k = 0; k < state.params.n; ++k) {
    RequestOutput ev;
    ev.request_id = state.external_id;
    ev.index = k;
    ev.finish_reason = FinishReason::kAbort;
    ev.error = message;
    ev.num_prompt_tokens = static_cast<int64_t>(state.prompt.size());
    state.sink(std::move(ev));
  }
  metrics_.on_finished(finished_stats(state, FinishReason::kAbort));
  std::lock_guard<std::mutex> lock(mu_);
  live_ids_.erase(state.external_id);
  --num_unscheduled_;
}

void LlmEngine::on_left_unscheduled(int64_t count) {
  if (count == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  num_unscheduled_ -= count;
}

void LlmEngine::abort_now(const std::string& external_id) {
  RequestId id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_ids_.find(external_id);
    if (it == live_ids_.end()) return;
    id = it->second;
  }
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  (void)scheduler_.abort(id);
  finish_request(*it->second, FinishReason::kAbort);
}

void LlmEngine::publish_state() {
  SchedulerStats st = scheduler_.stats();
  double usage =
      st.kv.num_blocks ? static_cast<double>(st.kv.num_used_blocks) / st.kv.num_blocks : 0.0;
  metrics_.set_state(st.num_running_requests, st.num_waiting_requests, st.num_preemptions, usage,
                     st.kv.num_query_tokens, st.kv.num_hit_tokens);
  std::lock_guard<std::mutex> lock(mu_);
  // A step planned ahead of samples that ended since is still to be collected
  // (and counted in the metrics): not idle until it is.
  idle_ = commands_.empty() && live_ids_.empty() && !running_step_;
  if (idle_) idle_cv_.notify_all();
}

void LlmEngine::check_invariants() {
  Status st = scheduler_.check_invariants();
  if (st.ok()) return;
  log_error("scheduler invariant broken: {}", st.error().message);
  std::lock_guard<std::mutex> lock(mu_);
  if (invariant_error_.empty()) invariant_error_ = st.error().message;
}

Result<std::shared_ptr<const CompiledConstraint>> LlmEngine::compile_constraint(
    const StructuredOutputSpec& spec) const {
  return grammar_compiler_->compile(spec);
}

}  // namespace pagoda
