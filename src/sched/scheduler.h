// The token-budget scheduler (vLLM v1 model). Every sequence moves
// num_computed_tokens toward its token count (prompt + outputs so far); a
// step spends at most max_num_batched_tokens over at most max_num_seqs
// running sequences: running requests first, in (priority, arrival) order,
// then waiting requests in the same order. Long prompts are split into
// chunks across steps and mixed with decodes; prefix-cache hits simply start
// a sequence with more tokens computed. When KV blocks run out the
// lowest-priority, latest-arriving running request is preempted by
// recompute: its blocks are freed and it returns to the waiting queue with
// its tokens, to recompute them (mostly from the prefix cache) on
// re-admission.
//
// Engine loop (one engine thread; the scheduler is not thread-safe):
//   out = schedule();                      // plan + KV allocation
//   apply out.copy_src/dst, run the model on out, sample out.logits_rows
//   update(sampled);                       // commit the step, append tokens
//   finish(seq, reason) / branch(...) / fork(...) as stop checks and
//   parallel sampling or beam search decide; abort(request) at any time;
//   replace_last_token(seq, tokens) where structured output jumps forward.
// Every schedule() must be followed by update() before the next schedule(),
// fork() or branch().
//
// Async scheduling (the host plans step N+1 while the device runs step N):
//   out1 = schedule();  run step 1 (do not wait)
//   out2 = schedule_ahead(seqs sampling in step 1);  run step 2
//   wait for step 1; resolve(its samples); stop checks: finish(...)
//   out3 = schedule_ahead(seqs sampling in step 2);  run step 3
//   wait for step 2; resolve(...); ...
//   or, to leave the pipeline (e.g. a beam step needs branch()): wait for
//   the last step and update(its samples) as after a schedule().
// A step planned ahead may still run a sequence that the resolve() of the
// step before then finishes; its result is skipped like any other sequence
// finished since schedule().
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "kv/kv_manager.h"
#include "sched/group_chunks.h"
#include "sched/request.h"
#include "sched/request_queue.h"
#include "sched/sched_config.h"
#include "sched/schedule_output.h"
#include "sched/step_plan.h"

namespace pagoda {

struct SampledToken {
  SeqId seq_id = 0;
  int32_t token = 0;
};

// One kept continuation for branch(): `parent` extended by `token`.
struct Branch {
  SeqId parent = 0;
  int32_t token = 0;
};

struct SchedulerStats {
  int32_t num_running_requests = 0;
  int32_t num_waiting_requests = 0;
  int32_t num_running_seqs = 0;
  int64_t num_preemptions = 0;
  KvStats kv;
};

class Scheduler {
 public:
  static Result<Scheduler> create(const SchedulerConfig& config);

  // Queues a request (waiting). Returns its first sequence's id.
  // kResourceExhausted when max_waiting requests wait already. The caller
  // validates requests (the engine: engine/request_fit.h); a spec that breaks
  // a precondition is kInternal: a duplicate id, an empty prompt or one
  // without room for output within max_model_len, num_seqs outside [1,
  // min(max_num_seqs, max_num_batched_tokens)], a negative max_new_tokens, or
  // a worst case (num_seqs sequences at full length, nothing shared) beyond
  // the KV pool, which could be preempted forever.
  Result<SeqId> add_request(RequestSpec spec);
  // Frees everything of the request at once, in any state. kNotFound if unknown.
  Status abort(RequestId id);

  // Plans the next step and allocates its KV blocks (may preempt). Called
  // again before update(), it logs the misuse and plans nothing.
  ScheduleOutput schedule();
  // Commits the last schedule()'s work (computed counts, prefix-cache
  // inserts), then appends each sampled token. Sequences finished or aborted
  // since schedule() are skipped. Fails on a token for a sequence that did
  // not just compute its last token. Every sequence that
  // sampled must then get its token (here, append_token() or branch()) or
  // be finished: a group advances only when all its members can.
  Status update(std::span<const SampledToken> sampled);
  // Appends a token to a sequence whose tokens are all computed.
  Status append_token(SeqId seq, int32_t token);
  // Jump-forward (structured output): replaces the sequence's last token,
  // which no step has computed yet (the token update() just appended), by
  // `tokens`, and allocates the KV blocks they need now; copy-on-write copies
  // that this takes are applied before the next step. The next step computes
  // the tokens as one chunk (fewer when the budget or the chunk cap splits
  // it) and samples after the last. Errors leave everything unchanged:
  // kResourceExhausted when the pool lacks the blocks (the caller keeps its
  // token: nobody is preempted for a jump); kInvalidArgument when a step is
  // in flight (between schedule() or schedule_ahead() and its update()),
  // the sequence is not running, its last token is computed or a
  // placeholder, `tokens` is empty or holds a negative id, or they would
  // pass max_model_len or the request's max_new_tokens.
  Status replace_last_token(SeqId seq, std::span<const int32_t> tokens);
  // Jump-forward under async scheduling: the sequence's last token is being
  // computed by the step in flight (planned ahead, its placeholder
  // resolved). It is replaced by `tokens` as replace_last_token does, and
  // the in-flight work on it is voided: that step still writes its KV and
  // samples after it, but the commit does not count it computed, and a
  // later step computes `tokens` from its position (overwriting that KV).
  // The caller drops the in-flight step's sample for the sequence (never
  // passes it to resolve() or update(), nor lists the sequence as pending
  // in schedule_ahead()). Errors leave everything unchanged:
  // kResourceExhausted as replace_last_token; kInvalidArgument when the
  // sequence has a placeholder or drafts, is not running, its tokens do not
  // end with the in-flight step's work, its last token is not an output,
  // `tokens` is empty or holds a negative id, or they would pass
  // max_model_len or max_new_tokens; kNotFound for an unknown sequence.
  Status replace_in_flight(SeqId seq, std::span<const int32_t> tokens);

  // Speculative decoding. set_draft appends `draft` (real ids) after the
  // sequence's last token -- an output that update() just appended, not yet
  // computed -- as drafts for the next schedule() only: that step computes
  // them whole, with the last token, and samples after each
  // (ScheduledSeq::num_draft_tokens), or drops them. Drafts never preempt
  // anyone nor split a step: they are trimmed to the step's token budget and
  // chunk cap, and dropped when their KV blocks are not free. Returns how
  // many were kept: at most what leaves room for the token sampled after the
  // last one within max_model_len and max_new_tokens. kInvalidArgument when
  // a step is in flight, the sequence is not running, has drafts already,
  // or its last token is not such an output; kNotFound for an unknown one.
  Result<int32_t> set_draft(SeqId seq, std::span<const int32_t> draft);
  // After update() of the step that computed the sequence's drafts: keeps
  // the first num_accepted (0..drafts) as verified tokens, computed, and
  // drops the rest with their KV blocks. The caller then appends the token
  // sampled after the last kept one (append_token()) or finishes the
  // sequence. kInvalidArgument when a step is in flight or the sequence has
  // no computed drafts; kNotFound for an unknown sequence.
  Status verify_draft(SeqId seq, int32_t num_accepted);
  // Verification planned past (async scheduling): schedule_ahead() lists a
  // sequence whose drafts the running step verifies as pending. It then
  // assumes every draft rejected: the drafts leave the sequence's tokens
  // (kept aside, their KV blocks held) and the placeholder takes the first
  // draft's position, to be fed the running step's sample after the token
  // before the drafts. ahead_drafts() gives those drafts (empty for any
  // other sequence). resolve() leaves such a placeholder to
  // resolve_verified(), which must follow it for every sequence still live:
  // with num_accepted == 0, `token` (the sample that was fed) replaces the
  // placeholder; else the placeholder's in-flight work is voided as
  // replace_in_flight() voids it, the kept drafts count as computed (the
  // running step wrote their KV; the step in flight rewrites the first one's
  // slot with the same token) and `token` follows them, for a later step to
  // compute. Either way the blocks past the sequence's tokens are released.
  // kInvalidArgument for a sequence without drafts verified ahead, or
  // num_accepted outside [0, drafts]; kNotFound for an unknown one.
  std::span<const int32_t> ahead_drafts(SeqId seq) const;
  Status resolve_verified(SeqId seq, int32_t num_accepted, int32_t token);

  // Plans the next step while the last planned one is still running: first
  // commits that step's work as update() would, and gives each sequence of
  // `pending` (those that sample in it; those it verifies drafts of:
  // resolve_verified()) a placeholder token kPendingToken,
  // planned like a real one (ScheduleOutput::token_ids holds kPendingToken
  // there). A sequence at max_model_len, or whose running sample is its
  // max_new_tokens-th, gets none (it ends with that sample, which resolve()
  // appends). resolve() must replace the placeholders
  // before the next schedule() or schedule_ahead(), which otherwise log the
  // misuse and plan nothing.
  ScheduleOutput schedule_ahead(std::span<const SeqId> pending);
  // Hands back an output the caller is done with (its step was collected),
  // so that a later schedule() or schedule_ahead() refills its vectors
  // instead of allocating new ones. Keeps at most kNumSpareOutputs.
  void recycle(ScheduleOutput out);
  // The samples of the step that schedule_ahead() ran ahead of: each replaces
  // its sequence's placeholder (a sequence without one gets the token
  // appended, even if schedule_ahead() preempted it); sequences finished or
  // aborted since are skipped. Every placeholder must get its token here or its sequence be
  // finished right after.
  Status resolve(std::span<const SampledToken> sampled);

  // A new sequence of parent's request with parent's tokens and KV (blocks
  // shared, copy-on-write); the request's width (num_seqs) bounds it.
  Result<SeqId> fork(SeqId parent);
  // Replaces the request's live sequences by `branches` (beam search step, or
  // the n first tokens of parallel sampling): sequences not named as a parent
  // are dropped (SeqEndReason::kDropped), the first branch of a parent
  // extends the parent itself, further ones extend forks of it. Returns the
  // sequence of each branch, in order.
  Result<std::vector<SeqId>> branch(RequestId id, std::span<const Branch> branches);
  // Ends a sequence and frees its KV at once; the request ends with its last
  // sequence.
  Status finish(SeqId seq, SeqEndReason reason);
  Status finish_request(RequestId id, SeqEndReason reason);

  const Sequence* sequence(SeqId seq) const;
  const Request* request(RequestId id) const;
  bool has_unfinished() const { return !requests_.empty(); }
  SchedulerStats stats() const;
  const KvManager& kv() const { return kv_; }
  const SchedulerConfig& config() const { return config_; }

  // Integrity check between any two calls: the KV manager's invariants,
  // every running sequence holding a table that matches its computed count,
  // waiting sequences holding none, queue membership, the sequence cap, and
  // placeholder tokens exactly where schedule_ahead() put them.
  Status check_invariants() const;

 private:
  explicit Scheduler(const SchedulerConfig& config) : config_(config), kv_(config.kv) {}

  // schedule() and schedule_ahead() once the previous step is accounted for.
  ScheduleOutput plan_step();
  // schedule() phases.
  void schedule_running(StepPlan& plan);
  void admit_waiting(StepPlan& plan);
  bool try_admit(Request& req, StepPlan& plan);
  bool reserve_blocks(const Request& req, const GroupChunks& chunks, StepPlan& plan);
  void grow_and_plan(const Request& req, const GroupChunks& chunks, StepPlan& plan);
  void preempt(Request& req, StepPlan& plan);
  void commit_in_flight();
  // Speculative decoding: trims or drops the drafts of req's sequences so
  // that the group samples within the step (set_draft's rules).
  void fit_drafts(Request& req, const StepPlan& plan);
  // Drops the last `count` drafts of seq (uncomputed, so no KV to release).
  static void drop_drafts(Sequence& seq, int32_t count);

  std::vector<int32_t> uncomputed_counts(const Request& req) const;
  int32_t num_running_seats() const;
  Status check_new_request(const RequestSpec& spec) const;
  Status check_request(const Request& req) const;
  SeqId fork_unchecked(Sequence& parent, Request& req);
  void drop_seq(Request& req, SeqId seq, SeqEndReason reason);
  void remove_request(Request& req);

  SchedulerConfig config_;
  KvManager kv_;
  std::unordered_map<RequestId, Request> requests_;
  std::unordered_map<SeqId, Sequence> seqs_;
  RequestQueue waiting_;
  RequestQueue running_;
  struct InFlight {
    SeqId seq = 0;
    int32_t num_new_tokens = 0;
  };
  std::vector<InFlight> in_flight_;  // the last schedule()'s work, until update()
  // Checks of replace_last_token / replace_in_flight: growing `seq` by `tokens`
  // to num_tokens stays within max_model_len, max_new_tokens and the KV pool.
  Status check_growth(const Sequence& seq, std::span<const int32_t> tokens,
                      int64_t num_tokens) const;
  // Allocates seq's blocks for num_tokens (copy-on-write copies go with the
  // next step).
  void grow(SeqId seq, int64_t num_tokens);
  // Of the last schedule_ahead(), until resolve(): sequence -> index of its
  // kPendingToken in the sequence's tokens.
  std::unordered_map<SeqId, int32_t> placeholders_;
  // Of the last schedule_ahead(), until resolve_verified(): sequences whose
  // drafts the running step verifies, assumed rejected -> those drafts.
  std::unordered_map<SeqId, std::vector<int32_t>> ahead_drafts_;
  std::vector<FinishedSeq> finished_;  // reported by the next schedule()
  // Sequences given drafts by set_draft(), until verify_draft() or until a
  // schedule() that does not compute them drops them.
  std::vector<SeqId> drafted_;
  // Copy-on-write copies taken by replace_last_token(), for the next step
  // (dropped when their sequence no longer holds the copy).
  struct PendingCopy {
    SeqId seq = 0;
    BlockCopy copy;
  };
  std::vector<PendingCopy> pending_copies_;
  // Outputs handed back by recycle(): one per step the engine can have in
  // flight (running + planned ahead).
  static constexpr size_t kNumSpareOutputs = 2;
  std::vector<ScheduleOutput> spare_;
  SeqId next_seq_id_ = 0;
  uint64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace pagoda
