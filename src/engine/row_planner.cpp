#include "engine/row_planner.h"

#include <algorithm>
#include <tuple>

#include "sample/bad_words.h"
#include "sample/sampling_rows.h"

namespace pagoda {

bool RowPlanner::plan(ScheduleOutput& out, const RequestMap& requests, const Scheduler& scheduler,
                      std::vector<RowRef>& refs, bool defer_masks) {
  const bool constrained = compute_masks(out, requests, scheduler, defer_masks);
  // The scheduler's logits rows (one per sampling sequence, its last new
  // token) become the planner's: one per sampling row.
  out.logits_rows.clear();
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    auto it = requests.find(out.seqs[i].request_id);
    if (it != requests.end()) plan_seq(out, i, *it->second, scheduler, refs);
  }
  return constrained;
}

void RowPlanner::plan_sampling(ScheduleOutput& out, const RequestMap& requests,
                               const Scheduler& scheduler, std::vector<RowRef>& refs) {
  const std::vector<RowRef> launched = std::move(refs);
  const std::vector<int32_t> launched_rows = std::move(out.logits_rows);
  refs.clear();
  out.logits_rows.clear();
  out.sampling.clear();
  compute_masks(out, requests, scheduler);
  size_t next = 0;  // the first launched row of sequence i
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& s = out.seqs[i];
    size_t count = 0;
    while (next + count < launched.size() && launched[next + count].seq == s.seq_id) ++count;
    auto it = requests.find(s.request_id);
    if (it != requests.end() && still_planned(s, *it->second, scheduler)) {
      plan_seq(out, i, *it->second, scheduler, refs);
    } else {
      for (size_t k = 0; k < count; ++k) {
        out.logits_rows.push_back(launched_rows[next + k]);
        append_prompt_logprob_row(out.sampling, SamplingParams{}, 0);
        refs.push_back(launched[next + k]);
      }
    }
    next += count;
  }
}

bool RowPlanner::still_planned(const ScheduledSeq& s, const RequestState& req,
                               const Scheduler& scheduler) {
  if (s.logits_index < 0 || req.beam || (req.num_seqs > 1 && !req.branched)) return true;
  return req.samples.contains(s.seq_id) && scheduler.sequence(s.seq_id) != nullptr;
}

bool RowPlanner::compute_masks(const ScheduleOutput& out, const RequestMap& requests,
                               const Scheduler& scheduler, bool skip) {
  masks_.clear();
  draft_states_.clear();
  row_mask_.clear();
  seq_mask_.assign(out.seqs.size(), -1);
  bool constrained = false;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& s = out.seqs[i];
    if (s.logits_index < 0) continue;
    auto it = requests.find(s.request_id);
    if (it == requests.end() || it->second->beam) continue;
    const RequestState& req = *it->second;
    // Before the fork, sample 0 holds the start state every fork begins from.
    auto sit = req.num_seqs > 1 && !req.branched ? req.samples.begin() : req.samples.find(s.seq_id);
    if (sit == req.samples.end() || !sit->second->constraint) continue;
    constrained = true;
    if (skip) continue;
    seq_mask_[i] = static_cast<int32_t>(row_mask_.size());
    const TokenConstraint& state = *sit->second->constraint;
    row_mask_.push_back(masks_.add(state, req.allowed_mask));
    if (s.num_draft_tokens == 0) continue;
    // Row j's state: the sample's, advanced over drafts 0..j-1.
    const Sequence* seq = scheduler.sequence(s.seq_id);
    const int32_t* drafts = seq->tokens.data() + seq->tokens.size() - s.num_draft_tokens;
    const TokenConstraint* prev = &state;
    for (int32_t j = 1; j <= s.num_draft_tokens; ++j) {
      std::unique_ptr<TokenConstraint> next = prev != nullptr ? prev->clone() : nullptr;
      if (next != nullptr && next->accept(drafts[j - 1])) {
        prev = draft_states_.emplace_back(std::move(next)).get();
        row_mask_.push_back(masks_.add(*prev, req.allowed_mask));
      } else {
        // propose_drafts cut the drafts to what the constraint accepts; were
        // one refused, no row after it could be kept: they reuse the last mask.
        prev = nullptr;
        row_mask_.push_back(row_mask_.back());
      }
    }
  }
  masks_.compute();
  return constrained;
}

void RowPlanner::plan_seq(ScheduleOutput& out, size_t i, const RequestState& req,
                          const Scheduler& scheduler, std::vector<RowRef>& refs) const {
  const ScheduledSeq& s = out.seqs[i];
  const auto [first, last] = req.prompt_logprobs.row_positions(s.start_position, s.num_new_tokens);
  for (int32_t p = first; p < last; ++p) {
    out.logits_rows.push_back(out.query_start_loc[i] + (p - s.start_position));
    append_prompt_logprob_row(out.sampling, req.params, req.prompt[static_cast<size_t>(p) + 1]);
    refs.push_back({RowKind::kPromptLogprob, req.id, s.seq_id, p + 1});
  }
  if (s.logits_index < 0) return;
  const int32_t row = out.query_start_loc[i + 1] - 1;
  auto [mask, no_allowed_token] = row_mask(i, 0, req);
  if (req.beam) {
    out.logits_rows.push_back(row);
    append_beam_row(out.sampling, req.beam->num_candidates_per_beam());
    refs.push_back({RowKind::kBeam, req.id, s.seq_id, 0});
  } else if (req.num_seqs > 1 && !req.branched) {
    // Sample 0 has no output yet: its counts are the prompt's, every fork's.
    const PenaltyCounts& prompt_counts = req.samples.begin()->second->penalties;
    for (int32_t k = 0; k < req.num_seqs; ++k) {
      out.logits_rows.push_back(row);
      append_sampling_row(out.sampling, req.params, eos_token_ids_,
                          {req.prompt, {}, sample_seed(req.seed, k), &prompt_counts, mask});
      refs.push_back({RowKind::kFirstSamples, req.id, s.seq_id, k, no_allowed_token});
    }
  } else {
    const SampleState& sample = *req.samples.at(s.seq_id);
    const Sequence* seq = scheduler.sequence(s.seq_id);
    const int32_t k = s.num_draft_tokens;
    // The outputs before the drafts; row j samples after j drafts more.
    const auto num_outputs = static_cast<size_t>(seq->num_output_tokens() - k);
    const int32_t* outputs = seq->tokens.data() + seq->num_prompt_tokens;
    const PenaltyCounts* counts = &sample.penalties;
    PenaltyCounts with_drafts;  // row j > 0: the sample's counts and drafts 0..j-1
    for (int32_t j = 0; j <= k; ++j) {
      if (j > 0 && uses_penalties(req.params)) {
        if (j == 1) with_drafts = sample.penalties;
        with_drafts.add(outputs[num_outputs + static_cast<size_t>(j) - 1]);
        counts = &with_drafts;
      }
      std::tie(mask, no_allowed_token) = row_mask(i, j, req);
      out.logits_rows.push_back(row - k + j);
      append_sampling_row(
          out.sampling, req.params, eos_token_ids_,
          {req.prompt, std::span<const int32_t>(outputs, num_outputs + static_cast<size_t>(j)),
           sample_seed(req.seed, sample.index), counts, mask});
      refs.push_back(
          {k > 0 ? RowKind::kVerify : RowKind::kSample, req.id, s.seq_id, j, no_allowed_token});
    }
  }
}

std::pair<std::span<const uint32_t>, bool> RowPlanner::row_mask(size_t i, int32_t j,
                                                                const RequestState& req) const {
  if (seq_mask_[i] < 0) return {req.allowed_mask, false};
  const std::span<const uint32_t> mask =
      masks_.mask(row_mask_[static_cast<size_t>(seq_mask_[i] + j)]);
  return {mask, mask.empty()};
}

bool RowPlanner::can_run_ahead(std::span<const RowRef> refs, const RequestMap& requests,
                               int64_t next_step) const {
  if (drafts_due(refs, requests, next_step)) return false;
  for (const RowRef& ref : refs) {
    if (ref.kind != RowKind::kSample && ref.kind != RowKind::kPromptLogprob &&
        ref.kind != RowKind::kDiscard && ref.kind != RowKind::kVerify) {
      return false;
    }
    auto it = requests.find(ref.req);
    if (it == requests.end()) continue;
    if ((ref.kind == RowKind::kSample || ref.kind == RowKind::kVerify) && it->second->speculates) {
      auto sit = it->second->samples.find(ref.seq);
      if (sit == it->second->samples.end()) continue;
      // Drafts likely rejected: the sample's last drafts (or asks) missed.
      if (ref.kind == RowKind::kVerify && sit->second->spec_backoff == 0) return false;
    }
    const SamplingParams& params = it->second->params;
    if (uses_penalties(params) || has_multi_token_word(params.bad_words_token_ids)) return false;
  }
  return true;
}

bool RowPlanner::drafts_due(std::span<const RowRef> refs, const RequestMap& requests,
                            int64_t next_step) {
  for (const RowRef& ref : refs) {
    if (ref.kind != RowKind::kSample) continue;
    auto it = requests.find(ref.req);
    if (it == requests.end() || !it->second->speculates) continue;
    auto sit = it->second->samples.find(ref.seq);
    if (sit != it->second->samples.end() && sit->second->spec_next_step <= next_step) return true;
  }
  return false;
}

void RowPlanner::link_pending_tokens(std::span<const RowRef> prev, ScheduleOutput& out) {
  std::unordered_map<SeqId, int32_t> sample_row;
  for (size_t r = 0; r < prev.size(); ++r) {
    // A verified sample's placeholder takes its first row's sample (the
    // token after the drafts' predecessor: Scheduler::resolve_verified).
    if (prev[r].kind == RowKind::kSample || (prev[r].kind == RowKind::kVerify && prev[r].arg == 0))
      sample_row.emplace(prev[r].seq, static_cast<int32_t>(r));
  }
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    for (int32_t row = out.query_start_loc[i]; row < out.query_start_loc[i + 1]; ++row) {
      if (out.token_ids[static_cast<size_t>(row)] != kPendingToken) continue;
      auto it = sample_row.find(out.seqs[i].seq_id);
      // A placeholder always stands for a sample of the previous step; if
      // not, the runner rejects the step (token -1 outside the vocabulary).
      if (it == sample_row.end()) continue;
      out.pending_rows.push_back(row);
      out.pending_sources.push_back(it->second);
    }
  }
}

}  // namespace pagoda
