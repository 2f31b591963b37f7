// Row planning: which logits rows a step samples and how. The scheduler's
// ScheduleOutput samples each sequence that reaches its last token once;
// the planner turns that into the step's sampling rows, in place:
//  - prompt-logprob rows for every prompt position a chunk computes while
//    the request's prompt logprobs are incomplete;
//  - one beam row per live beam of a beam-search request;
//  - the n first-sample rows of a request that forks (n / best_of > 1) when
//    its prompt finishes, all on the prompt's last row;
//  - otherwise one sampling row per sequence (penalties from its
//    incremental counts), or, for a sequence with k drafts (speculative
//    decoding), k + 1 verification rows: row j samples after the token
//    before the drafts and drafts 0..j-1, as if they were its outputs
//    (penalties, min_tokens and bad words count them).
// Structured output: a constrained sample's row is masked by its
// constraint's next tokens intersected with allowed_token_ids
// (constraint_masks.h); verification row j by the constraint's state after
// drafts 0..j-1 (a clone advanced over them; row 0 the sample's own state);
// the n first-sample rows of a fork all take the start state's mask (sample
// 0's, not advanced yet). Prompt-logprob rows stay raw.
// Each row gets a RowRef saying whom its sample belongs to.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/constraint_masks.h"
#include "engine/request_state.h"
#include "sched/schedule_output.h"
#include "sched/scheduler.h"

namespace pagoda {

using RequestMap = std::unordered_map<RequestId, std::unique_ptr<RequestState>>;

// Why a logits row is sampled. kDiscard: a kSample row whose sample is
// dropped, because jump-forward replaced the row's token while the step was
// in flight (Scheduler::replace_in_flight).
enum class RowKind { kSample, kFirstSamples, kBeam, kPromptLogprob, kVerify, kDiscard };

struct RowRef {
  RowKind kind;
  RequestId req;  // an id: the request may end before the row's result is read
  SeqId seq;
  // kFirstSamples: sample index; kPromptLogprob: prompt position predicted;
  // kVerify: drafts before the row's position (0..k).
  int32_t arg;
  // Structured output: the constraint allows none of the request's
  // allowed_token_ids, so the row is sampled unmasked and its sample ends
  // with an error instead of taking the token.
  bool no_allowed_token = false;
};

class RowPlanner {
 public:
  // vocab_size: the logits' width (masks' size).
  RowPlanner(std::vector<int32_t> eos_token_ids, int64_t vocab_size)
      : eos_token_ids_(std::move(eos_token_ids)), masks_(vocab_size) {}

  // Replaces out.logits_rows by one entry per sampling row, appends the rows
  // to out.sampling and their refs to `refs` (same order). Sequences of
  // requests not in `requests` get no rows. Computes the step's structured-
  // output masks first (reads the samples' constraints, changes none).
  // With `defer_masks` (a step planned ahead, whose constrained samples'
  // states still lack the previous step's tokens) the masks are left out and
  // the result says whether a row needed one: out.sampling is then a
  // placeholder, and plan_sampling() builds the real one once the tokens
  // are applied (StepBatch::defer_sampling).
  bool plan(ScheduleOutput& out, const RequestMap& requests, const Scheduler& scheduler,
            std::vector<RowRef>& refs, bool defer_masks = false);
  // Rebuilds out.sampling and `refs` (the rows plan() gave `out`, in the same
  // order and number) from the samples' current states, masks included. A
  // sequence whose request, sample or scheduler sequence ended since plan()
  // keeps its refs and gets unmasked greedy rows whose results are dropped.
  void plan_sampling(ScheduleOutput& out, const RequestMap& requests, const Scheduler& scheduler,
                     std::vector<RowRef>& refs);
  // Whether the step after one with rows `refs` may be planned before their
  // tokens are known: every row is a plain sample, a prompt logprob or a
  // verification row (no beam, no fork), no request has penalties or a
  // multi-token bad word (both read the last sampled tokens), no row
  // samples for a sample to be drafted in step `next_step` (SampleState::spec_next_step:
  // its drafts need this step's tokens on the host), and every verified
  // sample is in back-off (SampleState::spec_backoff > 0: its last drafts
  // missed, so these are likely rejected too; the next step is planned as
  // if they were, and a sample that keeps drafts loses its row there,
  // LlmEngine::verify_drafts). Constrained rows may run ahead: the next
  // step's masks wait for their tokens (plan's defer_masks).
  bool can_run_ahead(std::span<const RowRef> refs, const RequestMap& requests,
                     int64_t next_step) const;
  // Whether a row of `refs` samples for a sample to be drafted in step
  // `next_step` (can_run_ahead's speculative hold: the drafts need the row's
  // token on the host).
  static bool drafts_due(std::span<const RowRef> refs, const RequestMap& requests,
                         int64_t next_step);
  // Adds to `out` the pending rows (placeholder tokens) fed from the samples
  // of the step with rows `prev`.
  static void link_pending_tokens(std::span<const RowRef> prev, ScheduleOutput& out);

 private:
  // Queues the mask of every sampling row of a constrained sequence of `out`
  // in masks_ and computes them; seq_mask_[i]: -1 for an unconstrained
  // sequence i, else the offset in row_mask_ of its rows' entries (k + 1 of
  // them for a sequence with k drafts, in row order).
  // Returns whether a sampling row is constrained; with `skip` it only says
  // so and computes nothing (seq_mask_ all -1).
  bool compute_masks(const ScheduleOutput& out, const RequestMap& requests,
                     const Scheduler& scheduler, bool skip = false);
  // Row j's mask of sampling sequence i after compute_masks: allowed_token_ids,
  // or the constraint's mask within them; second: no token is left
  // (RowRef::no_allowed_token; the mask is then empty).
  std::pair<std::span<const uint32_t>, bool> row_mask(size_t i, int32_t j,
                                                      const RequestState& req) const;
  void plan_seq(ScheduleOutput& out, size_t i, const RequestState& req, const Scheduler& scheduler,
                std::vector<RowRef>& refs) const;
  // Whether plan_seq can still plan sequence i of `out` for `req` (its
  // sample and scheduler sequence live on) -- plan_sampling's test.
  static bool still_planned(const ScheduledSeq& s, const RequestState& req,
                            const Scheduler& scheduler);

  std::vector<int32_t> eos_token_ids_;
  // Scratch of plan(), reused step to step.
  ConstraintMasks masks_;
  std::vector<int32_t> seq_mask_;
  std::vector<size_t> row_mask_;
  // The constraint states after each prefix of the drafts, the masks' for
  // verification rows j >= 1 (they live until the next plan).
  std::vector<std::unique_ptr<TokenConstraint>> draft_states_;
};

}  // namespace pagoda
