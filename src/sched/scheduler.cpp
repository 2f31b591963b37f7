// Scheduler::schedule() and its phases.
#include "sched/scheduler.h"

#include <algorithm>

#include "core/log.h"

namespace pagoda {

Result<Scheduler> Scheduler::create(const SchedulerConfig& config) {
  PAGODA_RETURN_IF_ERROR(config.validate());
  return Scheduler(config);
}

ScheduleOutput Scheduler::schedule() {
  if (!in_flight_.empty()) {
    log_error(
        "scheduler: schedule() called before update() of the previous step; nothing scheduled");
    return {};
  }
  if (!placeholders_.empty()) {
    log_error(
        "scheduler: schedule() called before resolve() of the step planned ahead; nothing "
        "scheduled");
    return {};
  }
  return plan_step();
}

ScheduleOutput Scheduler::schedule_ahead(std::span<const SeqId> pending) {
  if (!placeholders_.empty()) {
    log_error(
        "scheduler: schedule_ahead() called before resolve() of the previous one; nothing "
        "scheduled");
    return {};
  }
  commit_in_flight();
  for (SeqId id : pending) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) continue;
    Sequence& seq = it->second;
    const Request& req = requests_.at(seq.request_id);
    if (req.running && seq.num_draft_tokens > 0 && seq.num_uncomputed() == seq.num_draft_tokens) {
      // The running step verifies the drafts: plan as if it rejects them all
      // (resolve_verified() corrects the sequence otherwise). Their blocks
      // stay: the running step writes there, and kept drafts need that KV.
      const auto first = seq.tokens.end() - seq.num_draft_tokens;
      ahead_drafts_[id].assign(first, seq.tokens.end());
      drop_drafts(seq, seq.num_draft_tokens);
      std::erase(drafted_, id);
    }
    if (!req.running || seq.num_uncomputed() != 0 || seq.num_tokens() >= config_.max_model_len ||
        (req.spec.max_new_tokens > 0 && seq.num_output_tokens() + 1 >= req.spec.max_new_tokens)) {
      continue;  // the running step's sample is its last: nothing to plan after it
    }
    placeholders_.emplace(id, seq.num_tokens());
    seq.tokens.push_back(kPendingToken);
  }
  return plan_step();
}

void Scheduler::recycle(ScheduleOutput out) {
  if (spare_.size() < kNumSpareOutputs) spare_.push_back(std::move(out));
}

ScheduleOutput Scheduler::plan_step() {
  StepPlan plan(config_.max_num_batched_tokens);
  for (const PendingCopy& p : pending_copies_) {
    if (!kv_.contains(p.seq)) continue;  // finished or preempted since: the copy is moot
    std::span<const int32_t> table =
        p.copy.group == KvGroup::kSliding ? kv_.sliding_block_table(p.seq) : kv_.block_table(p.seq);
    if (std::find(table.begin(), table.end(), p.copy.dst) != table.end())
      plan.copies().push_back(p.copy);
  }
  pending_copies_.clear();
  schedule_running(plan);
  // A step that had to preempt has no room to admit anyone.
  if (!plan.preempted_any()) admit_waiting(plan);
  for (const StepPlan::Entry& e : plan.entries())
    in_flight_.push_back({e.seq->id, e.num_new_tokens});
  // Drafts live for one step: those this step does not compute are dropped.
  if (!drafted_.empty()) {
    std::vector<SeqId> computed;
    for (SeqId id : drafted_) {
      auto it = seqs_.find(id);
      if (it == seqs_.end() || it->second.num_draft_tokens == 0) continue;
      const bool planned = std::any_of(plan.entries().begin(), plan.entries().end(),
                                       [id](const StepPlan::Entry& e) { return e.seq->id == id; });
      if (planned) {
        computed.push_back(id);
      } else {
        drop_drafts(it->second, it->second.num_draft_tokens);
      }
    }
    drafted_ = std::move(computed);
  }
  ScheduleOutput out;
  if (!spare_.empty()) {
    out = std::move(spare_.back());
    spare_.pop_back();
  }
  plan.build(kv_, out);
  out.finished.swap(finished_);
  finished_.clear();
  return out;
}

std::vector<int32_t> Scheduler::uncomputed_counts(const Request& req) const {
  std::vector<int32_t> counts;
  for (SeqId id : req.seqs) counts.push_back(seqs_.at(id).num_uncomputed());
  return counts;
}

// Running requests in (priority, arrival) order. A request that cannot get
// blocks for its chunks preempts from the back of the queue; the back is
// never already planned (planning goes front to back), unless it is the
// request itself, which then stops the phase.
void Scheduler::schedule_running(StepPlan& plan) {
  for (auto it = running_.begin(); it != running_.end() && plan.budget() > 0; ++it) {
    Request& req = requests_.at(it->id);
    fit_drafts(req, plan);
    GroupChunks chunks =
        split_group(uncomputed_counts(req), plan.budget(), config_.max_chunk_tokens);
    if (!chunks.samples && !drafted_.empty()) {
      // Drafts go only with the sample after them (fit_drafts keeps them
      // only where the group samples; this is its safety net).
      for (SeqId id : req.seqs) drop_drafts(seqs_.at(id), seqs_.at(id).num_draft_tokens);
      chunks = split_group(uncomputed_counts(req), plan.budget(), config_.max_chunk_tokens);
    }
    if (chunks.total == 0) continue;
    if (!reserve_blocks(req, chunks, plan)) break;
    grow_and_plan(req, chunks, plan);
  }
}

bool Scheduler::reserve_blocks(const Request& req, const GroupChunks& chunks, StepPlan& plan) {
  while (true) {
    KvBlocks needed;
    for (size_t i = 0; i < req.seqs.size(); ++i) {
      const Sequence& seq = seqs_.at(req.seqs[i]);
      needed += kv_.blocks_needed(seq.id, seq.num_computed_tokens + chunks.num_new_tokens[i]);
    }
    if (kv_.fits(needed)) return true;
    Request& victim = requests_.at(running_.back().id);
    bool self = &victim == &req;
    preempt(victim, plan);
    if (self) return false;
  }
}

void Scheduler::grow_and_plan(const Request& req, const GroupChunks& chunks, StepPlan& plan) {
  for (size_t i = 0; i < req.seqs.size(); ++i) {
    int32_t n = chunks.num_new_tokens[i];
    if (n == 0) continue;
    const Sequence& seq = seqs_.at(req.seqs[i]);
    kv_.grow(seq.id, seq.num_computed_tokens + n, plan.copies());
    plan.add(seq, n, chunks.samples);
  }
}

void Scheduler::preempt(Request& req, StepPlan& plan) {
  for (SeqId id : req.seqs) {
    kv_.free(id);
    Sequence& seq = seqs_.at(id);
    drop_drafts(seq, seq.num_draft_tokens);
    seq.num_computed_tokens = 0;
  }
  running_.erase(queue_key(req));
  waiting_.insert(queue_key(req));
  req.running = false;
  plan.add_preempted(req.spec.id, req.seqs);
  ++num_preemptions_;
}

void Scheduler::fit_drafts(Request& req, const StepPlan& plan) {
  bool any = false;
  int64_t total = 0;
  for (SeqId id : req.seqs) {
    const Sequence& seq = seqs_.at(id);
    any = any || seq.num_draft_tokens > 0;
    total += seq.num_uncomputed();
  }
  if (!any) return;
  // The budget's excess comes off the last sequences' drafts first; each
  // sequence's chunk, drafts included, stays within the chunk cap.
  int64_t excess = total - plan.budget();
  for (auto it = req.seqs.rbegin(); it != req.seqs.rend(); ++it) {
    Sequence& seq = seqs_.at(*it);
    int64_t cut = excess > 0 ? std::min<int64_t>(excess, seq.num_draft_tokens) : 0;
    if (config_.max_chunk_tokens > 0)
      cut = std::max<int64_t>(cut, seq.num_uncomputed() - config_.max_chunk_tokens);
    cut = std::min<int64_t>(std::max<int64_t>(cut, 0), seq.num_draft_tokens);
    drop_drafts(seq, static_cast<int32_t>(cut));
    excess -= cut;
  }
  KvBlocks needed;
  for (SeqId id : req.seqs) {
    const Sequence& seq = seqs_.at(id);
    needed += kv_.blocks_needed(seq.id, seq.num_tokens());
  }
  if (!kv_.fits(needed)) {
    for (SeqId id : req.seqs) drop_drafts(seqs_.at(id), seqs_.at(id).num_draft_tokens);
  }
}

void Scheduler::drop_drafts(Sequence& seq, int32_t count) {
  seq.tokens.resize(seq.tokens.size() - static_cast<size_t>(count));
  seq.num_draft_tokens -= count;
}

int32_t Scheduler::num_running_seats() const {
  int32_t seats = 0;
  for (const QueueKey& k : running_) seats += requests_.at(k.id).num_seats();
  return seats;
}

// Waiting requests in (priority, arrival) order, until the budget, the
// sequence cap or the KV pool stops the first one that does not fit (no
// skipping ahead, so large requests are not starved).
void Scheduler::admit_waiting(StepPlan& plan) {
  int32_t seats = num_running_seats();
  while (!waiting_.empty() && plan.budget() > 0) {
    Request& req = requests_.at(waiting_.front().id);
    if (seats + req.num_seats() > config_.max_num_seqs) break;
    if (!try_admit(req, plan)) break;
    seats += req.num_seats();
  }
}

// Looks up each sequence's cached prefix, plans the group's first chunks,
// and admits the whole group only if all their blocks are available.
bool Scheduler::try_admit(Request& req, StepPlan& plan) {
  std::vector<PrefixHit> hits;
  std::vector<int32_t> remaining;
  for (SeqId id : req.seqs) {
    const Sequence& seq = seqs_.at(id);
    hits.push_back(req.spec.use_prefix_cache ? kv_.find_prefix(seq.tokens, req.spec.cache_keys)
                                             : PrefixHit{});
    remaining.push_back(seq.num_tokens() - hits.back().num_tokens);
  }
  GroupChunks chunks = split_group(remaining, plan.budget(), config_.max_chunk_tokens);
  if (chunks.total == 0) return false;
  KvBlocks needed;
  for (size_t i = 0; i < hits.size(); ++i) {
    needed += kv_.blocks_needed(hits[i], hits[i].num_tokens + chunks.num_new_tokens[i]);
  }
  if (!kv_.fits(needed)) return false;
  // Claim every hit before allocating new blocks, so that no allocation
  // evicts a cached block that another sequence of the group just matched.
  for (size_t i = 0; i < hits.size(); ++i) {
    Sequence& seq = seqs_.at(req.seqs[i]);
    kv_.allocate(seq.id, hits[i], hits[i].num_tokens, req.spec.cache_keys);
    seq.num_computed_tokens = hits[i].num_tokens;
  }
  grow_and_plan(req, chunks, plan);  // new blocks only: hits end on a block boundary
  waiting_.erase(queue_key(req));
  running_.insert(queue_key(req));
  req.running = true;
  return true;
}

}  // namespace pagoda
