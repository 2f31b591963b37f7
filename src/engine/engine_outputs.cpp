// From sampled tokens to output events: stop checks, incremental
// detokenization, logprobs, finishing samples and requests.
#include <algorithm>

#include "core/log.h"
#include "engine/llm_engine.h"

namespace pagoda {

TokenLogprob LlmEngine::make_logprob(const SampleOutput& so, size_t r, int32_t token, float lp, int32_t rank,
                                     int32_t num_top) const {
  TokenLogprob t;
  t.token_id = token;
  t.logprob = lp;
  t.rank = rank;
  const size_t k = so.token_ids.empty() ? 0 : so.top_ids.size() / so.token_ids.size();
  const size_t n = std::min(k, static_cast<size_t>(std::max(0, num_top)));
  for (size_t j = 0; j < n; ++j) t.top.push_back({so.top_ids[r * k + j], so.top_logprobs[r * k + j]});
  return t;
}

void LlmEngine::on_token(RequestState& req, SampleState& sample, SeqId seq, int32_t token, const SampleOutput& so,
                         size_t r) {
  const Clock::time_point now = Clock::now();
  if (!req.first_token) {
    req.first_token = now;
    metrics_.on_first_token(seconds_between(req.arrival, now),
                            seconds_between(req.arrival, req.first_scheduled.value_or(now)));
  } else if (sample.last_token_time != Clock::time_point{}) {
    metrics_.on_inter_token(seconds_between(sample.last_token_time, now));
  }
  sample.last_token_time = now;
  metrics_.on_tokens(1);
  sample.cumulative_logprob += so.logprobs[r];
  sample.count_token(req.params, token);

  const Clock::time_point detok_start = Clock::now();
  StopUpdate upd = sample.stop.append(token, sample.detok.feed(token));
  const bool by_length = upd.finish == StopFinish::kLength;
  if (by_length) upd.text += sample.detok.flush();
  detokenize_seconds_ += seconds_between(detok_start, Clock::now());
  RequestOutput ev;
  ev.request_id = req.external_id;
  ev.index = sample.index;
  ev.token_ids = {token};
  ev.text = std::move(upd.text);
  if (req.params.logprobs) ev.logprobs.push_back(make_logprob(so, r, token, so.logprobs[r], so.ranks[r], *req.params.logprobs));
  ev.num_prompt_tokens = static_cast<int64_t>(req.prompt.size());
  ev.num_output_tokens = sample.stop.num_tokens();
  ev.num_cached_prompt_tokens = req.num_cached_prompt_tokens;
  if (sample.index == 0 && !req.holds_outputs()) attach_prompt_logprobs(req, ev);
  if (!upd.finished()) {
    emit(req, &sample, std::move(ev));
    return;
  }
  ev.finish_reason = by_length ? FinishReason::kLength : FinishReason::kStop;
  if (!upd.stop_string.empty()) {
    ev.stop_reason = upd.stop_string;
  } else if (upd.stop_token >= 0) {
    ev.stop_reason = upd.stop_token;
  }
  (void)scheduler_.finish(seq, by_length ? SeqEndReason::kLength : SeqEndReason::kStop);
  const FinishReason reason = *ev.finish_reason;
  emit(req, &sample, std::move(ev));
  finish_sample(req, seq, reason);
}

void LlmEngine::attach_prompt_logprobs(RequestState& req, RequestOutput& event) {
  if (!req.wants_prompt_logprobs() || req.prompt_logprobs_sent) return;
  event.prompt_logprobs = req.prompt_logprobs;
  req.prompt_logprobs_sent = true;
}

void LlmEngine::emit(RequestState& req, SampleState* sample, RequestOutput&& event) {
  if (sample != nullptr && req.holds_outputs()) {
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

// Merges the held events of one sample into a single event.
RequestOutput merge_events(std::vector<RequestOutput>& held, int index) {
  RequestOutput out = std::move(held.front());
  for (size_t i = 1; i < held.size(); ++i) {
    RequestOutput& e = held[i];
    out.token_ids.insert(out.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
    out.text += e.text;
    out.logprobs.insert(out.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    out.finish_reason = e.finish_reason;
    out.stop_reason = e.stop_reason;
    out.num_output_tokens = e.num_output_tokens;
  }
  out.index = index;
  return out;
}

// The text `tokens` add after the prompt (decoded as its continuation, like
// the streamed text of a sample).
std::string continuation_text(const Tokenizer& tok, const RequestState& req, std::span<const int32_t> tokens) {
  IncrementalDetokenizer detok(tok, req.params.skip_special_tokens, req.prompt);
  std::string text;
  for (int32_t t : tokens) text += detok.feed(t);
  return text + detok.flush();
}

}  // namespace

// Sends what is still owed (best_of winners; abort events for unreported
// indices), records metrics and forgets the request. `reason` matters for
// metrics and for the abort events.
void LlmEngine::finish_request(RequestState& req, FinishReason reason, const std::string& error) {
  if (req.holds_outputs() && reason != FinishReason::kAbort) {
    auto& done = req.done_samples;
    std::stable_sort(done.begin(), done.end(),
                     [](const auto& a, const auto& b) { return a->cumulative_logprob > b->cumulative_logprob; });
    for (int k = 0; k < req.params.n && static_cast<size_t>(k) < done.size(); ++k) {
      if (done[static_cast<size_t>(k)]->held.empty()) continue;
      RequestOutput ev = merge_events(done[static_cast<size_t>(k)]->held, k);
      if (k == 0) attach_prompt_logprobs(req, ev);
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
  const bool aborted = reason == FinishReason::kAbort;
  metrics_.on_finished(aborted ? FinishReason::kAbort : reason, seconds_between(req.arrival, Clock::now()));
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
    if (k == 0) attach_prompt_logprobs(req, ev);
    emit(req, nullptr, std::move(ev));
  }
  (void)scheduler_.finish_request(req.id, SeqEndReason::kStop);
  finish_request(req, best);
}

}  // namespace pagoda
