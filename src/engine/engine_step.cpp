// One engine step: schedule, let the row planner complete the
// ScheduleOutput's StepBatch (row_planner.h), launch it, and hand the sampled
// tokens back to the scheduler and the per-request state. With async
// scheduling the next step is planned and launched before the current one's
// samples are read (Scheduler::schedule_ahead), its placeholder tokens fed
// on the device from the current step's samples. If that step has
// structured-output rows, their masks need the current step's tokens: its
// forward is launched ahead with the sampler deferred, and once the tokens
// are applied its masks are built (on the thread pool, while the device
// runs the forward) and its sampler launched (finish_launch). A verification
// step's next step is planned ahead when its drafts are likely rejected
// (RowPlanner::can_run_ahead), as if they all were: a sample that keeps
// drafts after all drops its row in that step (verify_drafts). A small step
// shortly after a request arrived while steps ran is not planned ahead
// (RunAheadPolicy), so that the next arrival joins the next step.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/log.h"
#include "engine/constrained_draft.h"
#include "engine/llm_engine.h"
#include "spec/backoff.h"
#include "spec/verify.h"

namespace pagoda {

void LlmEngine::step() {
  const Clock::time_point start = Clock::now();
  if (parts_.proposer) spec_cost_.step_started();
  detokenize_seconds_ = 0.0;
  if (!running_step_) {
    propose_drafts();
    ScheduleOutput out = scheduler_.schedule();
    end_sequences(out);
    if (out.empty()) {
      // Nothing can run now (e.g. waiting requests need blocks that running ones
      // hold); wait briefly for commands instead of spinning.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(1),
                   [this] { return stop_ || !commands_.empty(); });
      (void)scheduler_.update({});
      scheduler_.recycle(std::move(out));
      return;
    }
    running_step_.emplace();
    if (!launch(std::move(out), nullptr, *running_step_)) {
      (void)scheduler_.update({});
      running_step_.reset();
      return;
    }
  }
  // Step N runs on the device. With async scheduling, plan and launch step
  // N+1 now, so that the host work of both hides behind N's device time.
  LaunchedStep current = std::move(*running_step_);
  running_step_.reset();
  if (parts_.proposer && parts_.options.async_scheduling) defer_undraftable(current.refs);
  // Eligible steps run ahead unless the adaptive rule holds them: a small
  // batch shortly after a busy arrival (RunAheadPolicy), so that the next
  // arrival joins the next step.
  const bool eligible = parts_.options.async_scheduling &&
                        planner_.can_run_ahead(current.refs, requests_, num_launched_) &&
                        !has_jump_forward_rows(current.refs);
  const bool ahead = eligible && run_ahead_.run_ahead(current.out.seqs.size());
  // Held for drafts: the next step drafts, so none runs ahead of it
  // (spec_cost_policy.h counts this step's time to that verification).
  const bool held_for_drafts = parts_.proposer && parts_.options.async_scheduling && !ahead &&
                               RowPlanner::drafts_due(current.refs, requests_, num_launched_);
  bool next_failed = false;
  bool overlapped = false;
  if (ahead) {
    std::vector<SeqId> pending;
    for (const RowRef& ref : current.refs) {
      // A verified sample: its first row's sample, as if every draft were rejected.
      if (ref.kind == RowKind::kSample || (ref.kind == RowKind::kVerify && ref.arg == 0))
        pending.push_back(ref.seq);
    }
    ScheduleOutput next = scheduler_.schedule_ahead(pending);
    end_sequences(next);
    if (!next.empty()) {
      LaunchedStep launched{};
      if (launch(std::move(next), &current, launched)) {
        overlapped = launched.stage != LaunchedStep::Stage::kNotLaunched;
        running_step_ = std::move(launched);
      } else {
        next_failed = true;
      }
    }
  }
  SampleOutput so;
  const Status st = parts_.runner->collect(current.slot, &so);
  if (!st.ok()) {
    fail_batch(current.out, st.error().message);
    if (ahead)
      (void)scheduler_.resolve({});
    else
      (void)scheduler_.update({});
  } else {
    // The next steps' sequences: the running ones and those that wait to join.
    const SchedulerStats sched = scheduler_.stats();
    const int64_t seqs = std::min<int64_t>(parts_.runner->max_num_seqs(),
                                           int64_t{sched.num_running_seqs} + sched.num_waiting_requests);
    jump_rows_left_ = std::max<int64_t>(0, kJumpForwardMaxStepRows - seqs);
    apply_results(current.refs, so, ahead, current.index);
  }
  // A failed ahead launch aborted its requests; its scheduler step is empty now.
  if (next_failed) (void)scheduler_.update({});
  // Constrained rows of the step planned ahead: masks from the tokens just applied.
  if (running_step_ && running_step_->stage != LaunchedStep::Stage::kLaunched) {
    if (!finish_launch(*running_step_)) running_step_.reset();
  } else if (running_step_) {
    drop_jumped_rows(running_step_->refs);
  }
  jumped_in_flight_.clear();
  const bool decode_only =
      static_cast<size_t>(current.out.num_decode_seqs) == current.out.seqs.size();
  if (parts_.proposer) measure_spec_cost(current, held_for_drafts);
  // The step was collected: its buffers become a later step's.
  scheduler_.recycle(std::move(current.out));
  metrics_.on_step(seconds_between(start, Clock::now()), parts_.runner->last_step_wait_seconds(),
                   detokenize_seconds_, parts_.runner->last_graph_batch_size() > 0, decode_only,
                   overlapped, eligible && !ahead);
}

bool LlmEngine::launch(ScheduleOutput out, const LaunchedStep* prev, LaunchedStep& step) {
  step.out = std::move(out);
  mark_scheduled(step.out);
  recount_preempted(step.out);
  // Planned ahead (prev set), a constrained sample's state lacks prev's token.
  const bool constrained =
      planner_.plan(step.out, requests_, scheduler_, step.refs, /*defer_masks=*/prev != nullptr);
  step.stage = LaunchedStep::Stage::kLaunched;
  if (prev != nullptr && constrained) {
    step.stage = static_cast<int64_t>(step.out.logits_rows.size()) <= parts_.runner->max_num_seqs()
                     ? LaunchedStep::Stage::kSamplingDeferred
                     : LaunchedStep::Stage::kNotLaunched;
  }
  step.out.defer_sampling = step.stage == LaunchedStep::Stage::kSamplingDeferred;
  if (prev != nullptr) RowPlanner::link_pending_tokens(prev->refs, step.out);
  step.slot = next_slot_;
  step.index = num_launched_;
  if (step.stage != LaunchedStep::Stage::kNotLaunched) {
    const Status st = parts_.runner->launch(step.out, step.slot);
    if (!st.ok()) {
      fail_batch(step.out, st.error().message);
      return false;
    }
    hand_hidden_states(step.out);
  }
  metrics_.on_launch(static_cast<int64_t>(step.out.token_ids.size()));
  ++num_launched_;
  next_slot_ = (next_slot_ + 1) % kNumStepSlots;
  return true;
}

void LlmEngine::hand_hidden_states(const ScheduleOutput& out) {
  if (!parts_.proposer || !parts_.proposer->wants_hidden_states()) return;
  const Tensor hidden = parts_.runner->hidden_states();
  if (hidden.empty()) return;
  const Tensor aux = parts_.runner->aux_hidden_states();  // [A, max T, H] or empty
  const int64_t h = hidden.dim(1);
  const size_t row_bytes = static_cast<size_t>(h) * dtype_size(hidden.dtype);
  if (!aux.empty()) {  // views over rows [0, the last sequence row + 1)
    int64_t num_rows = 0;
    for (size_t i = 0; i < out.seqs.size(); ++i)
      num_rows = std::max<int64_t>(num_rows, parts_.runner->hidden_row(out.query_start_loc[i]) +
                                                 out.seqs[i].num_new_tokens);
    std::vector<Tensor> views;
    for (int64_t j = 0; j < aux.dim(0); ++j)
      views.push_back(Tensor(static_cast<char*>(aux.data) + j * aux.dim(1) * row_bytes, aux.dtype,
                             {num_rows, h}));
    parts_.proposer->on_aux_hidden_states(views);
  }
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& seq = out.seqs[i];
    const auto rit = requests_.find(seq.request_id);
    if (rit == requests_.end() || !rit->second->speculates) continue;
    const int32_t row = parts_.runner->hidden_row(out.query_start_loc[i]);
    const Sequence* sq = scheduler_.sequence(seq.seq_id);
    const Request* req = scheduler_.request(seq.request_id);
    HiddenRowsPrefix prefix;
    if (sq != nullptr && req != nullptr) {
      const int32_t num_known = std::clamp(
          seq.start_position + seq.num_new_tokens - seq.num_draft_tokens, 0, sq->num_tokens());
      prefix = {std::span<const int32_t>(sq->tokens).first(static_cast<size_t>(num_known)),
                req->spec.cache_keys};
    }
    parts_.proposer->on_hidden_states(seq.seq_id, seq.start_position,
                                      Tensor(static_cast<char*>(hidden.data) + row * row_bytes,
                                             hidden.dtype, {seq.num_new_tokens, h}),
                                      aux.empty() ? -1 : row, prefix);
  }
}

bool LlmEngine::finish_launch(LaunchedStep& step) {
  planner_.plan_sampling(step.out, requests_, scheduler_, step.refs);
  drop_jumped_rows(step.refs);
  const bool deferred = step.stage == LaunchedStep::Stage::kSamplingDeferred;
  step.out.defer_sampling = false;
  const Status st = deferred ? parts_.runner->launch_sampling(step.slot, step.out.sampling)
                             : parts_.runner->launch(step.out, step.slot);
  step.stage = LaunchedStep::Stage::kLaunched;
  if (st.ok() && !deferred) hand_hidden_states(step.out);
  if (st.ok()) return true;
  fail_batch(step.out, st.error().message);
  (void)scheduler_.update({});
  scheduler_.recycle(std::move(step.out));
  return false;
}

void LlmEngine::drop_jumped_rows(std::vector<RowRef>& refs) const {
  if (jumped_in_flight_.empty()) return;
  for (RowRef& ref : refs) {
    if (ref.kind == RowKind::kSample && jumped_in_flight_.contains(ref.seq))
      ref.kind = RowKind::kDiscard;
  }
}

bool LlmEngine::has_jump_forward_rows(std::span<const RowRef> refs) const {
  if (static_cast<int64_t>(refs.size()) >= kMinRowsToPipelineJumps) return false;
  for (const RowRef& ref : refs) {
    if (ref.kind != RowKind::kSample) continue;
    auto it = requests_.find(ref.req);
    if (it != requests_.end() && jumps_forward(*it->second)) return true;
  }
  return false;
}

void LlmEngine::propose_drafts() {
  if (!parts_.proposer) return;
  const SpeculativeConfig& config = parts_.options.speculative;
  std::vector<DraftInput> inputs;
  std::vector<DraftLimits> limits;    // [inputs]
  std::vector<SampleState*> samples;  // [inputs]
  int64_t num_running = 0;
  for (const auto& [id, req] : requests_) {
    const Request* sched_req = scheduler_.request(id);
    if (sched_req == nullptr || !sched_req->running) continue;
    num_running += static_cast<int64_t>(sched_req->seqs.size());
    // Before the fork of n > 1 the samples are not sequences yet.
    if (!req->speculates || (req->num_seqs > 1 && !req->branched)) continue;
    for (const auto& [seq_id, sample] : req->samples) {
      const Sequence* seq = scheduler_.sequence(seq_id);
      if (seq == nullptr || seq->num_uncomputed() != 1 || seq->num_output_tokens() < 1 ||
          seq->num_draft_tokens != 0 || sample->spec_next_step > num_launched_) {
        continue;
      }
      inputs.push_back(
          {seq_id, seq->tokens, seq->num_prompt_tokens, config.num_speculative_tokens});
      limits.push_back({sample->constraint.get(), req->allowed_mask,
                        jumps_forward(*req) ? parts_.tokenizer.get() : nullptr,
                        req->max_tokens - sample->stop.num_tokens()});
      samples.push_back(sample.get());
    }
  }
  if (inputs.empty()) return;
  if (config.disable_by_batch_size > 0 && num_running > config.disable_by_batch_size) return;
  std::vector<std::vector<int32_t>> drafts;
  const Status st = parts_.proposer->propose(inputs, drafts);
  if (!st.ok()) {
    log_warn("speculative decoding: the proposer failed, this step runs undrafted: {}",
             st.error().message);
    return;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Result<int32_t> kept = 0;
    if (i < drafts.size()) {
      // Structured output and allowed_token_ids: only what the masked rows could keep.
      drafts[i].resize(allowed_draft_length(drafts[i], limits[i]));
      if (!drafts[i].empty()) kept = scheduler_.set_draft(inputs[i].seq_id, drafts[i]);
    }
    if (!kept.ok()) log_error("speculative decoding: {}", kept.error().message);
    // No draft: a miss for the back-off.
    if (!kept.ok() || *kept == 0) note_drafts(*samples[i], num_launched_, false, false);
  }
}

void LlmEngine::defer_undraftable(std::span<const RowRef> refs) {
  const int32_t k = parts_.options.speculative.num_speculative_tokens;
  for (const RowRef& ref : refs) {
    if (ref.kind != RowKind::kSample) continue;
    auto rit = requests_.find(ref.req);
    if (rit == requests_.end() || !rit->second->speculates) continue;
    auto sit = rit->second->samples.find(ref.seq);
    if (sit == rit->second->samples.end()) continue;
    SampleState& sample = *sit->second;
    if (sample.spec_next_step > num_launched_) continue;
    const Sequence* seq = scheduler_.sequence(ref.seq);
    // A placeholder (a token not on the host yet): the search cannot be checked.
    if (seq == nullptr || seq->tokens.empty() || seq->tokens.back() == kPendingToken) continue;
    if (!parts_.proposer->may_draft_after_next_token(
            {ref.seq, seq->tokens, seq->num_prompt_tokens, k})) {
      sample.spec_next_step = num_launched_ + 1;
    }
  }
}

void LlmEngine::note_drafts(SampleState& sample, int64_t step, bool accepted, bool verified) const {
  sample.spec_ever_accepted = sample.spec_ever_accepted || accepted;
  // A sample never accepted backs off to the longest cap: the cost model
  // prices a miss, it cannot tell whether this sample's drafts will ever hit.
  const bool unproven = !sample.spec_ever_accepted && parts_.options.speculative.miss_cost_budget > 0;
  const int32_t cap = unproven ? SpecBackoff::kMaxCap : backoff_cap_;
  sample.spec_backoff = SpecBackoff::next_wait(sample.spec_backoff, accepted, cap);
  sample.spec_next_step = SpecBackoff::next_step(step, sample.spec_backoff, verified, cap);
}

void LlmEngine::measure_spec_cost(const LaunchedStep& step, bool held_for_drafts) {
  // Sequences that verified drafts (one kVerify row with arg 0 each); with
  // the single-token ones they make up a step without a prefill chunk.
  int64_t num_verifying = 0;
  for (const RowRef& ref : step.refs) num_verifying += ref.kind == RowKind::kVerify && ref.arg == 0;
  const size_t num_seqs = step.out.seqs.size();
  using Kind = SpecCostPolicy::StepKind;
  const Kind kind = num_verifying > 0 ? Kind::kVerifying
                    : held_for_drafts ? Kind::kHeld
                                      : Kind::kPlain;
  spec_cost_.step_finished(
      num_seqs, static_cast<size_t>(num_verifying),
      static_cast<size_t>(step.out.num_decode_seqs + num_verifying) == num_seqs, kind);
  backoff_cap_ = spec_cost_.cap(num_seqs);
  // Reported: the last step whose bucket has an r (a run's tail of a few
  // sequences, never measured, keeps the steady batch's figures).
  const std::optional<double> r = spec_cost_.extra_cost(num_seqs);
  if (r || !spec_cost_reported_) metrics_.set_spec_backoff_cap(backoff_cap_, r);
  spec_cost_reported_ = spec_cost_reported_ || r;
}

void LlmEngine::end_sequences(const ScheduleOutput& out) {
  if (!parts_.proposer) return;
  for (const FinishedSeq& f : out.finished)
    parts_.proposer->on_sequence_end(f.seq_id, f.tokens, f.num_prompt_tokens);
}

void LlmEngine::verify_drafts(RequestId req_id, SeqId seq_id, std::span<const size_t> rows,
                              std::span<const RowRef> refs, const SampleOutput& so, int64_t step) {
  const Sequence* seq = scheduler_.sequence(seq_id);
  if (seq == nullptr) return;  // ended since the step was scheduled
  // Planned past (the step after this one was planned ahead): the drafts
  // were set aside, and the sequence ends with a placeholder fed rows[0]'s sample.
  const std::span<const int32_t> ahead_drafts = scheduler_.ahead_drafts(seq_id);
  const bool ahead = !ahead_drafts.empty();
  const int32_t k = ahead ? static_cast<int32_t>(ahead_drafts.size()) : seq->num_draft_tokens;
  // Row j's sample is the target's token after draft j - 1.
  std::vector<int32_t> samples;
  for (size_t r : rows) samples.push_back(so.token_ids[r]);
  if (k + 1 != static_cast<int32_t>(rows.size())) {
    log_error("sequence {}: {} drafts but {} verification rows", seq_id, k, rows.size());
    if (ahead && !samples.empty()) (void)scheduler_.resolve_verified(seq_id, 0, samples[0]);
    return;
  }
  const std::span<const int32_t> drafts =
      ahead ? ahead_drafts
            : std::span<const int32_t>(
                  seq->tokens.data() + seq->tokens.size() - static_cast<size_t>(k),
                  static_cast<size_t>(k));
  const int32_t accepted =
      std::clamp(parts_.acceptance_rule ? parts_.acceptance_rule(samples, drafts)
                                        : num_accepted(samples, drafts),
                 0, k);
  // The step's tokens: the kept drafts (with the exact rule, equal to the
  // target's samples) and the target's sample after them.
  std::vector<int32_t> tokens(drafts.begin(), drafts.begin() + accepted);
  tokens.push_back(samples[static_cast<size_t>(accepted)]);
  Status st = Status::Ok();
  if (ahead) {
    st = scheduler_.resolve_verified(seq_id, accepted, tokens.back());
    if (accepted > 0) jumped_in_flight_.insert(seq_id);
  } else {
    st = scheduler_.verify_draft(seq_id, accepted);
    if (st.ok()) st = scheduler_.append_token(seq_id, tokens.back());
  }
  if (!st.ok()) {
    log_error("sequence {}: verification failed: {}", seq_id, st.error().message);
    return;
  }
  parts_.proposer->on_verified(seq_id, k, accepted);
  metrics_.on_spec_verified(k, accepted);
  if (auto rit = requests_.find(req_id); rit != requests_.end()) {
    auto sit = rit->second->samples.find(seq_id);
    if (sit != rit->second->samples.end()) note_drafts(*sit->second, step, accepted > 0, true);
  }
  // The kept drafts and the sample after them are this step's tokens, in
  // order; any of them may end the sample (a stop, max_tokens).
  for (int32_t j = 0; j <= accepted; ++j) {
    auto rit = requests_.find(req_id);
    if (rit == requests_.end()) return;
    RequestState& req = *rit->second;
    auto it = req.samples.find(seq_id);
    if (it == req.samples.end()) return;
    const size_t r = rows[static_cast<size_t>(j)];
    on_token(req, *it->second, seq_id,
             {tokens[static_cast<size_t>(j)], r, refs[r].no_allowed_token},
             j == accepted ? TokenPlace::kLast : TokenPlace::kKeptDraft, so);
  }
}

void LlmEngine::mark_scheduled(const ScheduleOutput& out) {
  const Clock::time_point now = Clock::now();
  int64_t newly_scheduled = 0;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    auto it = requests_.find(out.seqs[i].request_id);
    if (it == requests_.end()) continue;
    if (!it->second->first_scheduled) {
      it->second->first_scheduled = now;
      it->second->num_cached_prompt_tokens = out.seqs[i].start_position;
      ++newly_scheduled;
    }
  }
  on_left_unscheduled(newly_scheduled);
}

void LlmEngine::recount_preempted(const ScheduleOutput& out) {
  for (const SeqId id : out.preempted_seq_ids) {
    const Sequence* seq = scheduler_.sequence(id);
    if (seq == nullptr) continue;
    auto rit = requests_.find(seq->request_id);
    if (rit == requests_.end()) continue;
    RequestState& req = *rit->second;
    auto sit = req.samples.find(id);
    if (sit == req.samples.end()) continue;
    sit->second->recount(req.params, req.prompt,
                         std::span<const int32_t>(seq->tokens.data() + seq->num_prompt_tokens,
                                                  static_cast<size_t>(seq->num_output_tokens())));
  }
}

void LlmEngine::apply_results(const std::vector<RowRef>& refs, const SampleOutput& so, bool ahead,
                              int64_t step) {
  std::vector<SampledToken> sampled;
  struct Pending {
    RequestId req;  // an id, not a pointer: an earlier event of this step may end the request
    SeqId seq;
    int32_t token;
    size_t row;
    bool no_allowed_token;  // RowRef::no_allowed_token
  };
  std::vector<Pending> tokens;
  std::map<RequestState*, std::vector<SampledRow>> first;  // per sample index
  struct Verify {
    RequestId req;
    SeqId seq;
    std::vector<size_t> rows;  // drafts + 1, in order
  };
  std::vector<Verify> verifies;
  std::vector<RequestId> beams;  // requests with beam rows, in row order
  for (size_t r = 0; r < refs.size(); ++r) {
    const RowRef& ref = refs[r];
    auto rit = requests_.find(ref.req);
    if (rit == requests_.end())
      continue;  // ended (aborted, or stopped by the step before) after launch
    RequestState* req = rit->second.get();
    const int32_t token = so.token_ids[r];
    switch (ref.kind) {
      case RowKind::kPromptLogprob:
        req->prompt_logprobs.record(ref.arg, req->prompt, so, r);
        break;
      case RowKind::kSample:
        sampled.push_back({ref.seq, token});
        tokens.push_back({ref.req, ref.seq, token, r, ref.no_allowed_token});
        break;
      case RowKind::kFirstSamples:
        first[req].push_back({token, r, ref.no_allowed_token});
        break;
      case RowKind::kVerify:
        if (ref.arg == 0) verifies.push_back({ref.req, ref.seq, {}});
        verifies.back().rows.push_back(r);
        break;
      case RowKind::kDiscard:
        break;
      case RowKind::kBeam:
        req->beam->add_candidates(ref.seq, so, r);
        if (std::find(beams.begin(), beams.end(), ref.req) == beams.end()) beams.push_back(ref.req);
        break;
    }
  }
  Status st = ahead ? scheduler_.resolve(sampled) : scheduler_.update(sampled);
  if (!st.ok())
    log_error("scheduler {} failed: {}", ahead ? "resolve" : "update", st.error().message);
  for (auto& [req, list] : first) start_samples(*req, req->samples.begin()->first, list, so);
  for (RequestId id : beams) {
    auto rit = requests_.find(id);
    if (rit != requests_.end()) step_beam(*rit->second);
  }
  for (const Pending& p : tokens) {
    auto rit = requests_.find(p.req);
    if (rit == requests_.end()) continue;  // ended by an earlier event this step
    RequestState& req = *rit->second;
    auto it = req.samples.find(p.seq);
    if (it != req.samples.end())
      on_token(req, *it->second, p.seq, {p.token, p.row, p.no_allowed_token}, TokenPlace::kLast,
               so);
  }
  for (const Verify& v : verifies) verify_drafts(v.req, v.seq, v.rows, refs, so, step);
}

// The prompt's prefill finished: fork the request into its n samples, the
// k-th continuing with tokens[k]. Every fork starts from sample 0's
// constraint state (nothing accepted yet), each then advances by its token.
void LlmEngine::start_samples(RequestState& req, SeqId seq0, const std::vector<SampledRow>& tokens,
                              const SampleOutput& so) {
  std::vector<Branch> branches;
  for (const SampledRow& t : tokens) branches.push_back({seq0, t.token});
  Result<std::vector<SeqId>> ids = scheduler_.branch(req.id, branches);
  if (!ids.ok()) {
    log_error("request {}: fork into {} samples failed: {}", req.external_id, tokens.size(),
              ids.error().message);
    (void)scheduler_.abort(req.id);
    finish_request(req, FinishReason::kAbort);
    return;
  }
  req.branched = true;
  if (parts_.proposer && req.speculates) {
    for (size_t k = 1; k < ids->size(); ++k) parts_.proposer->on_fork(seq0, (*ids)[k]);
  }
  const TokenConstraint* start = req.samples.at((*ids)[0])->constraint.get();
  for (size_t k = 1; k < ids->size(); ++k) {
    auto sample = std::make_unique<SampleState>(static_cast<int>(k), *parts_.tokenizer, req.params,
                                                parts_.eos_token_ids, req.max_tokens, req.prompt);
    if (start != nullptr) sample->constraint = start->clone();
    req.samples.emplace((*ids)[k], std::move(sample));
  }
  const RequestId id = req.id;  // on_token may end (and destroy) the request
  for (size_t k = 0; k < ids->size(); ++k) {
    if (!requests_.contains(id)) return;
    auto it = req.samples.find((*ids)[k]);
    if (it != req.samples.end())
      on_token(req, *it->second, (*ids)[k], tokens[k], TokenPlace::kLast, so);
  }
}

void LlmEngine::step_beam(RequestState& req) {
  const Clock::time_point now = Clock::now();
  if (!req.first_token) {
    req.first_token = now;
    metrics_.on_first_token(seconds_between(req.arrival, now),
                            static_cast<int64_t>(req.prompt.size()));
  }
  req.last_token = now;
  const std::vector<Branch> branches = req.beam->step();
  if (branches.empty()) {
    finish_beam(req);
    return;
  }
  Result<std::vector<SeqId>> ids = scheduler_.branch(req.id, branches);
  if (!ids.ok()) {
    log_error("request {}: beam step failed: {}", req.external_id, ids.error().message);
    (void)scheduler_.abort(req.id);
    finish_request(req, FinishReason::kAbort);
    return;
  }
  metrics_.on_tokens(static_cast<int64_t>(branches.size()));
  req.num_generation_tokens += static_cast<int64_t>(branches.size());
  ++req.max_sample_tokens;
  req.beam->set_live(std::move(*ids));
}

void LlmEngine::fail_batch(const ScheduleOutput& out, const std::string& message) {
  log_error("model step failed: {}", message);
  for (const ScheduledSeq& s : out.seqs) {
    auto it = requests_.find(s.request_id);
    if (it == requests_.end()) continue;
    RequestState& req = *it->second;
    (void)scheduler_.abort(req.id);
    finish_request(req, FinishReason::kAbort, message);
  }
}

}  // namespace pagoda
