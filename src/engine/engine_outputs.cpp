// From sampled tokens to output events: stop checks, incremental
// detokenization, logprobs, finishing samples and requests.
#include <fmt/format.h>

#include <algorithm>

#include "core/log.h"
#include "engine/best_of.h"
#include "engine/jump_forward.h"
#include "engine/llm_engine.h"
#include "engine/token_logprobs.h"

namespace pagoda {

void LlmEngine::on_token(RequestState& req, SampleState& sample, SeqId seq, const SampledRow& sampled,
                         TokenPlace place, const SampleOutput& so) {
  const int32_t token = sampled.token;
  const size_t r = sampled.row;
  // The output tokens of this event: the sampled token, or the tokens that
  // jump-forward put in its place (jump_forward.h).
  std::vector<int32_t> tokens = {token};
  if (sample.constraint) {
    if (sampled.no_allowed_token) {
      fail_sample(req, sample, seq, "structured output: the constraint allows none of the request's allowed_token_ids");
      return;
    }
    // Only the sequence's last token can be replaced: a kept draft has the
    // step's later tokens after it (propose_drafts cut drafts that would jump).
    // A jump is cut to the output budget and to the rows the step may still
    // take (jump_rows_left_); with room for no extra token it is not planned.
    const int64_t max_jump_tokens =
        std::min<int64_t>(req.max_tokens - sample.stop.num_tokens(), jump_rows_left_ + 1);
    std::unique_ptr<TokenConstraint> before =
        place == TokenPlace::kLast && max_jump_tokens > 1 && jumps_forward(req)
            ? sample.constraint->clone()
            : nullptr;
    // The row was masked by this state's next tokens, so a refusal is a bug
    // (a constraint whose mask and accept() disagree).
    if (!sample.constraint->accept(token)) {
      fail_sample(req, sample, seq,
                  fmt::format("structured output: the sampled token {} is not allowed by the constraint", token));
      return;
    }
    if (before) {
      std::optional<JumpForward> jump =
          plan_jump_forward(*parts_.tokenizer, *before, *sample.constraint, token, kJumpForwardMaxBytes,
                            static_cast<int32_t>(max_jump_tokens));
      // The scheduler refuses when the KV pool lacks the jump's blocks: the
      // sampled token then stands and decoding goes on token by token. While
      // a step planned ahead computes the token, the token is replaced there
      // (its row's work and sample in that step are dropped).
      bool jumped = jump && scheduler_.replace_last_token(seq, jump->tokens).ok();
      if (jump && !jumped) {
        jumped = scheduler_.replace_in_flight(seq, jump->tokens).ok();
        if (jumped) jumped_in_flight_.insert(seq);
      }
      if (jumped) {
        jump_rows_left_ -= static_cast<int64_t>(jump->tokens.size()) - 1;
        tokens = std::move(jump->tokens);
        sample.constraint = std::move(jump->state);
      }
    }
  }
  const Clock::time_point now = Clock::now();
  if (!req.first_token) {
    req.first_token = now;
    metrics_.on_first_token(seconds_between(req.arrival, now), static_cast<int64_t>(req.prompt.size()));
  } else if (sample.last_token_time != Clock::time_point{}) {
    metrics_.on_inter_token(seconds_between(sample.last_token_time, now));
  }
  sample.last_token_time = now;
  req.last_token = now;
  // Only the sampled token has a logprob (jump-forward runs only for
  // requests that report none and do not rank samples by them).
  sample.cumulative_logprob += so.logprobs[r];

  // Each token in order through the stop checks: a stop string, stop token
  // or max_tokens inside a jump ends the output at that token. No id
  // follows the token that ends the output (a stop token, max_tokens, or the
  // last token of a finished constraint), so the detokenizer's held-back
  // text (a decoder that waits for the next id) goes with it, through the
  // stop-string check.
  const Clock::time_point detok_start = Clock::now();
  const bool completes = sample.constraint && sample.constraint->is_finished();
  StopUpdate upd;
  size_t num_taken = 0;
  while (num_taken < tokens.size() && !upd.finished()) {
    const int32_t t = tokens[num_taken++];
    sample.count_token(req.params, t);
    const std::string released = sample.stop.stops_at(t) ? sample.detok.flush() : std::string();
    std::string text = sample.detok.feed(t);
    if (sample.stop.ends_with(t) || (completes && num_taken == tokens.size())) text += sample.detok.flush();
    StopUpdate u = sample.stop.append(t, text, released);
    u.text.insert(0, upd.text);
    upd = std::move(u);
  }
  tokens.resize(num_taken);
  req.num_generation_tokens += static_cast<int64_t>(num_taken);
  metrics_.on_tokens(static_cast<int64_t>(num_taken));
  req.max_sample_tokens = std::max<int64_t>(req.max_sample_tokens, sample.stop.num_tokens());
  // Structured output: a finished constraint ends the sample as EOS would
  // ("stop", no stop_reason), also before min_tokens (its mask then allows
  // only EOS, and sampling_rows lifts bans that would empty a mask). Stop
  // strings, stop tokens and max_tokens still end it earlier, with an output
  // that is a prefix of one the constraint accepts.
  if (!upd.finished() && completes) {
    upd.text += sample.stop.end_complete().text;
    upd.finish = StopFinish::kStop;
  }
  const bool by_length = upd.finish == StopFinish::kLength;
  detokenize_seconds_ += seconds_between(detok_start, Clock::now());
  RequestOutput ev;
  ev.request_id = req.external_id;
  ev.index = sample.index;
  ev.token_ids = std::move(tokens);
  ev.text = std::move(upd.text);
  if (req.params.logprobs) ev.logprobs.push_back(make_token_logprob(so, r, token, so.logprobs[r], so.ranks[r], *req.params.logprobs));
  ev.num_prompt_tokens = static_cast<int64_t>(req.prompt.size());
  ev.num_output_tokens = sample.stop.num_tokens();
  ev.num_cached_prompt_tokens = req.num_cached_prompt_tokens;
  if (sample.index == 0 && !holds_outputs(req.params)) req.prompt_logprobs.attach_once(ev);
  if (!upd.finished()) {
    emit(req, &sample, std::move(ev));
    return;
  }
  ev.finish_reason = by_length ? FinishReason::kLength : FinishReason::kStop;
  if (!upd.stop_string.empty()) {
    ev.stop_reason = upd.stop_string;
  } else if (upd.stop_token >= 0 && !upd.by_eos) {
    ev.stop_reason = upd.stop_token;
  }
  (void)scheduler_.finish(seq, by_length ? SeqEndReason::kLength : SeqEndReason::kStop);
  const FinishReason reason = *ev.finish_reason;
  emit(req, &sample, std::move(ev));
  finish_sample(req, seq, reason);
}

bool LlmEngine::jumps_forward(const RequestState& req) const {
  return parts_.options.jump_forward && req.constraint != nullptr && !req.params.logprobs &&
         !holds_outputs(req.params);
}

void LlmEngine::fail_sample(RequestState& req, SampleState& sample, SeqId seq, const std::string& message) {
  log_error("request {} index {}: {}", req.external_id, sample.index, message);
  if (holds_outputs(req.params)) {
    // best_of picks among finished samples: an errored one fails them all.
    (void)scheduler_.abort(req.id);
    finish_request(req, FinishReason::kAbort, message);
    return;
  }
  RequestOutput ev;
  ev.request_id = req.external_id;
  ev.index = sample.index;
  ev.finish_reason = FinishReason::kAbort;
  ev.error = message;
  ev.num_prompt_tokens = static_cast<int64_t>(req.prompt.size());
  ev.num_output_tokens = sample.stop.num_tokens();
  ev.num_cached_prompt_tokens = req.num_cached_prompt_tokens;
  if (sample.index == 0) req.prompt_logprobs.attach_once(ev);
  (void)scheduler_.finish(seq, SeqEndReason::kAbort);
  emit(req, &sample, std::move(ev));
  finish_sample(req, seq, FinishReason::kAbort);
}

void LlmEngine::emit(RequestState& req, SampleState* sample, RequestOutput&& event) {
  if (sample != nullptr && holds_outputs(req.params)) {
    sample->held.push_back(std::move(event));
    return;
  }
  if (event.finish_reason && event.index >= 0 && static_cast<size_t>(event.index) < req.index_reported.size()) {
    req.index_reported[static_cast<size_t>(event.index)] = true;
  }
  req.sink(std::move(event));
}

void LlmEngine::finish_sample(RequestState& req, SeqId seq, FinishReason reason) {
  auto it = req.samples.find(seq);
  if (it == req.samples.end()) return;
  it->second->finished = true;
  req.done_samples.push_back(std::move(it->second));
  req.samples.erase(it);
  ++req.num_finished_samples;
  if (req.samples.empty()) finish_request(req, reason);
}

namespace {

// The text `tokens` add after the prompt (decoded as its continuation, like
// the streamed text of a sample).
std::string continuation_text(const Tokenizer& tok, const RequestState& req, std::span<const int32_t> tokens) {
  IncrementalDetokenizer detok(tok, req.params.skip_special_tokens, req.prompt);
  std::string text;
  for (int32_t t : tokens) text += detok.feed(t);
  return text + detok.flush();
}

}  // namespace

FinishedRequestStats LlmEngine::finished_stats(const RequestState& req, FinishReason reason) const {
  const Clock::time_point now = Clock::now();
  // A phase the request never reached ends now.
  const Clock::time_point scheduled = req.first_scheduled.value_or(now);
  const Clock::time_point first = req.first_token.value_or(now);
  const Clock::time_point last = req.first_token ? req.last_token : now;
  FinishedRequestStats s;
  s.reason = reason;
  s.e2e_s = seconds_between(req.arrival, now);
  s.queue_s = seconds_between(req.arrival, scheduled);
  s.prefill_s = seconds_between(scheduled, first);
  s.decode_s = seconds_between(first, last);
  s.inference_s = seconds_between(scheduled, last);
  s.num_prompt_tokens = static_cast<int64_t>(req.prompt.size());
  s.num_cached_prompt_tokens = req.num_cached_prompt_tokens;
  s.num_generation_tokens = req.num_generation_tokens;
  s.max_sample_tokens = req.max_sample_tokens;
  s.n = req.params.n;
  s.max_tokens = req.max_tokens;
  return s;
}

// Sends what is still owed (best_of winners; abort events for unreported
// indices), records metrics and forgets the request. `reason` matters for
// metrics and for the abort events.
void LlmEngine::finish_request(RequestState& req, FinishReason reason, const std::string& error) {
  if (holds_outputs(req.params) && reason != FinishReason::kAbort) {
    for (RequestOutput& ev : best_of_winners(req.done_samples, req.params.n)) {
      if (ev.index == 0) req.prompt_logprobs.attach_once(ev);
      emit(req, nullptr, std::move(ev));
    }
  }
  for (size_t k = 0; k < req.index_reported.size(); ++k) {
    if (req.index_reported[k]) continue;
    RequestOutput ev;
    ev.request_id = req.external_id;
    ev.index = static_cast<int>(k);
    ev.finish_reason = FinishReason::kAbort;
    ev.error = error;
    ev.num_prompt_tokens = static_cast<int64_t>(req.prompt.size());
    emit(req, nullptr, std::move(ev));
  }
  metrics_.on_finished(finished_stats(req, reason));
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_ids_.erase(req.external_id);
    if (!req.first_scheduled) --num_unscheduled_;
  }
  requests_.erase(req.id);  // destroys req
}

void LlmEngine::finish_beam(RequestState& req) {
  std::vector<BeamHypothesis> results = req.beam->results();
  const auto& eos = parts_.eos_token_ids;
  FinishReason best = FinishReason::kLength;
  for (size_t k = 0; k < results.size() && k < req.index_reported.size(); ++k) {
    const BeamHypothesis& h = results[k];
    RequestOutput ev;
    ev.request_id = req.external_id;
    ev.index = static_cast<int>(k);
    ev.token_ids = h.tokens;
    const Clock::time_point detok_start = Clock::now();
    ev.text = continuation_text(*parts_.tokenizer, req, h.tokens);
    detokenize_seconds_ += seconds_between(detok_start, Clock::now());
    bool ended = !h.tokens.empty() && std::find(eos.begin(), eos.end(), h.tokens.back()) != eos.end();
    ev.finish_reason = ended ? FinishReason::kStop : FinishReason::kLength;
    if (k == 0) best = *ev.finish_reason;
    ev.num_prompt_tokens = static_cast<int64_t>(req.prompt.size());
    ev.num_output_tokens = static_cast<int64_t>(h.tokens.size());
    ev.num_cached_prompt_tokens = req.num_cached_prompt_tokens;
    if (k == 0) req.prompt_logprobs.attach_once(ev);
    emit(req, nullptr, std::move(ev));
  }
  (void)scheduler_.finish_request(req.id, SeqEndReason::kStop);
  finish_request(req, best);
}

}  // namespace pagoda
