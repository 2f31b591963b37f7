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
//   parallel sampling or beam search decide; abort(request) at any time.
// Every schedule() must be followed by update() before the next schedule(),
// fork() or branch().
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
  // kResourceExhausted when max_waiting requests wait already;
  // kInvalidArgument for a duplicate id, an empty or too long prompt, a bad
  // num_seqs, or a request that could never fit the KV pool.
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

  // Idle-time integrity check (between update() and schedule()): the KV
  // manager's invariants, every running sequence holding a table that
  // matches its computed count, waiting sequences holding none, queue
  // membership, the sequence cap.
  Status check_invariants() const;

 private:
  explicit Scheduler(const SchedulerConfig& config) : config_(config), kv_(config.kv) {}

  // schedule() phases.
  void schedule_running(StepPlan& plan);
  void admit_waiting(StepPlan& plan);
  bool try_admit(Request& req, StepPlan& plan);
  bool reserve_blocks(const Request& req, const GroupChunks& chunks, StepPlan& plan);
  void grow_and_plan(const Request& req, const GroupChunks& chunks, StepPlan& plan);
  void preempt(Request& req, StepPlan& plan);
  void commit_in_flight();

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
  std::vector<InFlight> in_flight_;    // the last schedule()'s work, until update()
  std::vector<FinishedSeq> finished_;  // reported by the next schedule()
  SeqId next_seq_id_ = 0;
  uint64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace pagoda
