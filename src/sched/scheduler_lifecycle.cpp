// Scheduler: adding, updating, forking, finishing and aborting requests, and
// the integrity check.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "sched/scheduler.h"

namespace pagoda {

namespace {

Error invalid(std::string message) {
  return make_error(ErrorCode::kInvalidArgument, std::move(message));
}
Error internal(std::string message) {
  return make_error(ErrorCode::kInternal, std::move(message));
}

}  // namespace

// add_request's preconditions (scheduler.h): the caller's request check
// guarantees them, so a failure is a bug (kInternal).
Status Scheduler::check_new_request(const RequestSpec& spec) const {
  if (requests_.contains(spec.id))
    return internal(fmt::format("request {}: id already in use", spec.id));
  const int64_t num_prompt = static_cast<int64_t>(spec.prompt_tokens.size());
  if (num_prompt == 0) return internal(fmt::format("request {}: empty prompt", spec.id));
  if (num_prompt >= config_.max_model_len) {
    return internal(fmt::format(
        "request {}: prompt of {} tokens leaves no room for output within max_model_len = {}",
        spec.id, num_prompt, config_.max_model_len));
  }
  int32_t max_width = std::min(config_.max_num_seqs, config_.max_num_batched_tokens);
  if (spec.num_seqs < 1 || spec.num_seqs > max_width) {
    return internal(fmt::format("request {}: num_seqs = {} must be in [1, {}]", spec.id,
                                spec.num_seqs, max_width));
  }
  if (spec.max_new_tokens < 0) {
    return internal(
        fmt::format("request {}: max_new_tokens = {} must be >= 0", spec.id, spec.max_new_tokens));
  }
  // Worst case without any sharing must fit the pool, or the request could
  // be preempted forever.
  int64_t max_len = spec.max_new_tokens > 0
                        ? std::min<int64_t>(num_prompt + spec.max_new_tokens, config_.max_model_len)
                        : config_.max_model_len;
  const int64_t max_step = config_.max_chunk_tokens > 0
                               ? std::min(config_.max_chunk_tokens, config_.max_num_batched_tokens)
                               : config_.max_num_batched_tokens;
  const KvBlocks per_seq = kv_.max_blocks_per_seq(max_len, max_step);
  int64_t blocks = int64_t{spec.num_seqs} * per_seq.full;
  if (blocks > kv_.num_blocks()) {
    return internal(fmt::format(
        "request {}: {} sequence(s) of up to {} tokens need {} KV blocks; the pool has {}", spec.id,
        spec.num_seqs, max_len, blocks, kv_.num_blocks()));
  }
  int64_t sliding = int64_t{spec.num_seqs} * per_seq.sliding;
  if (sliding > kv_.num_sliding_blocks()) {
    return internal(fmt::format(
        "request {}: {} sequence(s) need {} sliding-window KV blocks; the sliding pool has {}",
        spec.id, spec.num_seqs, sliding, kv_.num_sliding_blocks()));
  }
  return Status::Ok();
}

Result<SeqId> Scheduler::add_request(RequestSpec spec) {
  PAGODA_RETURN_IF_ERROR(check_new_request(spec));
  if (waiting_.size() >= config_.max_waiting) {
    return make_error(
        ErrorCode::kResourceExhausted,
        fmt::format("request {}: waiting queue is full ({} requests)", spec.id, waiting_.size()));
  }
  SeqId seq_id = next_seq_id_++;
  Sequence& seq = seqs_[seq_id];
  seq.id = seq_id;
  seq.request_id = spec.id;
  seq.num_prompt_tokens = static_cast<int32_t>(spec.prompt_tokens.size());
  seq.tokens = std::move(spec.prompt_tokens);
  spec.prompt_tokens.clear();
  RequestId id = spec.id;
  Request& req = requests_[id];
  req.spec = std::move(spec);
  req.arrival = next_arrival_++;
  req.seqs = {seq_id};
  waiting_.insert(queue_key(req));
  return seq_id;
}

void Scheduler::commit_in_flight() {
  for (const InFlight& f : in_flight_) {
    auto it = seqs_.find(f.seq);
    if (it == seqs_.end()) continue;  // finished or aborted since schedule()
    Sequence& seq = it->second;
    // A step computes a sequence's drafts whole; they count as computed only
    // once verify_draft() keeps them (the KV manager caches verified blocks
    // only).
    seq.num_computed_tokens += f.num_new_tokens - seq.num_draft_tokens;
    kv_.commit(seq.id, seq.tokens, seq.num_computed_tokens);
  }
  in_flight_.clear();
}

Status Scheduler::update(std::span<const SampledToken> sampled) {
  commit_in_flight();
  for (const SampledToken& s : sampled) {
    if (!seqs_.contains(s.seq_id)) continue;  // finished or aborted since schedule()
    PAGODA_RETURN_IF_ERROR(append_token(s.seq_id, s.token));
  }
  return Status::Ok();
}

Status Scheduler::resolve(std::span<const SampledToken> sampled) {
  std::unordered_map<SeqId, int32_t> open = std::move(placeholders_);
  placeholders_.clear();
  for (const SampledToken& s : sampled) {
    auto it = seqs_.find(s.seq_id);
    if (it == seqs_.end()) continue;  // finished or aborted since
    auto p = open.find(s.seq_id);
    Sequence& seq = it->second;
    if (p == open.end()) {
      // The sample was the sequence's last (no placeholder was planned). It
      // may have been preempted by schedule_ahead() since: the token still
      // belongs after its tokens (a recompute will compute it).
      if (seq.num_tokens() >= config_.max_model_len) {
        return invalid(fmt::format("sequence {}: already at max_model_len = {}", s.seq_id,
                                   config_.max_model_len));
      }
      seq.tokens.push_back(s.token);
      continue;
    }
    const int32_t position = p->second;
    if (position >= seq.num_tokens() ||
        seq.tokens[static_cast<size_t>(position)] != kPendingToken) {
      return internal(fmt::format("sequence {}: placeholder at {} is gone", s.seq_id, position));
    }
    seq.tokens[static_cast<size_t>(position)] = s.token;
    open.erase(p);
  }
  for (const auto& [seq, position] : open) {
    if (!seqs_.contains(seq)) continue;
    if (!ahead_drafts_.contains(seq))
      return internal(fmt::format("sequence {}: placeholder without a sampled token", seq));
    placeholders_.emplace(seq, position);  // resolve_verified()'s
  }
  return Status::Ok();
}

std::span<const int32_t> Scheduler::ahead_drafts(SeqId seq) const {
  auto it = ahead_drafts_.find(seq);
  if (it == ahead_drafts_.end()) return {};
  return it->second;
}

Status Scheduler::resolve_verified(SeqId id, int32_t num_accepted, int32_t token) {
  auto d = ahead_drafts_.find(id);
  if (d == ahead_drafts_.end())
    return invalid(fmt::format("sequence {}: no drafts verified ahead", id));
  const std::vector<int32_t> drafts = std::move(d->second);
  ahead_drafts_.erase(d);
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("sequence {}: unknown", id));
  if (num_accepted < 0 || num_accepted > static_cast<int32_t>(drafts.size())) {
    return invalid(
        fmt::format("sequence {}: {} of {} drafts accepted", id, num_accepted, drafts.size()));
  }
  Sequence& seq = it->second;
  // The placeholder (if schedule_ahead() gave one) sits where the first draft was.
  int32_t position = seq.num_tokens();
  if (auto p = placeholders_.find(id); p != placeholders_.end()) {
    position = p->second;
    placeholders_.erase(p);
    if (position + 1 != seq.num_tokens() ||
        seq.tokens[static_cast<size_t>(position)] != kPendingToken) {
      return internal(fmt::format("sequence {}: placeholder at {} is gone", id, position));
    }
  }
  const bool running = requests_.at(seq.request_id).running;
  if (num_accepted > 0 && running) {
    // The placeholder's in-flight work (the first draft's slot) is voided.
    const auto f = std::find_if(in_flight_.begin(), in_flight_.end(),
                                [id](const InFlight& e) { return e.seq == id; });
    if (f != in_flight_.end()) f->num_new_tokens = 0;
    if (seq.num_computed_tokens != position) {
      return internal(fmt::format("sequence {}: {} computed, drafts verified from {}", id,
                                  seq.num_computed_tokens, position));
    }
  }
  seq.tokens.resize(static_cast<size_t>(position));
  seq.tokens.insert(seq.tokens.end(), drafts.begin(), drafts.begin() + num_accepted);
  seq.tokens.push_back(token);
  if (!running) return Status::Ok();  // preempted by schedule_ahead(): recomputed later
  seq.num_computed_tokens += num_accepted;
  kv_.commit(seq.id, seq.tokens, seq.num_computed_tokens);
  kv_.shrink(seq.id, seq.num_tokens());
  return Status::Ok();
}

Status Scheduler::append_token(SeqId id, int32_t token) {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("sequence {}: unknown", id));
  Sequence& seq = it->second;
  if (!requests_.at(seq.request_id).running || seq.num_uncomputed() != 0) {
    return invalid(
        fmt::format("sequence {}: cannot take a token before its last token is computed ({} of {})",
                    id, seq.num_computed_tokens, seq.num_tokens()));
  }
  if (seq.num_tokens() >= config_.max_model_len) {
    return invalid(
        fmt::format("sequence {}: already at max_model_len = {}", id, config_.max_model_len));
  }
  seq.tokens.push_back(token);
  return Status::Ok();
}

Status Scheduler::replace_last_token(SeqId id, std::span<const int32_t> tokens) {
  if (!in_flight_.empty() || placeholders_.contains(id)) {
    return invalid(
        fmt::format("sequence {}: cannot replace its last token while a step is in flight", id));
  }
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("sequence {}: unknown", id));
  Sequence& seq = it->second;
  const Request& req = requests_.at(seq.request_id);
  if (!req.running || seq.num_uncomputed() != 1 || seq.num_output_tokens() < 1) {
    return invalid(
        fmt::format("sequence {}: its last token is not an uncomputed output ({} of {} computed)",
                    id, seq.num_computed_tokens, seq.num_tokens()));
  }
  const int64_t num_tokens = seq.num_tokens() - 1 + static_cast<int64_t>(tokens.size());
  PAGODA_RETURN_IF_ERROR(check_growth(seq, tokens, num_tokens));
  grow(id, num_tokens);
  seq.tokens.pop_back();
  seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.end());
  return Status::Ok();
}

Status Scheduler::replace_in_flight(SeqId id, std::span<const int32_t> tokens) {
  if (placeholders_.contains(id))
    return invalid(fmt::format("sequence {}: its last token is a placeholder", id));
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("sequence {}: unknown", id));
  Sequence& seq = it->second;
  const auto f = std::find_if(in_flight_.begin(), in_flight_.end(),
                              [id](const InFlight& e) { return e.seq == id; });
  if (!requests_.at(seq.request_id).running || f == in_flight_.end() || f->num_new_tokens < 1 ||
      seq.num_draft_tokens != 0 ||
      seq.num_computed_tokens + f->num_new_tokens != seq.num_tokens() ||
      seq.num_output_tokens() < 1) {
    return invalid(fmt::format(
        "sequence {}: its last token is not an output that the step in flight computes", id));
  }
  const int64_t num_tokens = seq.num_tokens() - 1 + static_cast<int64_t>(tokens.size());
  PAGODA_RETURN_IF_ERROR(check_growth(seq, tokens, num_tokens));
  grow(id, num_tokens);
  --f->num_new_tokens;  // the replaced token's KV is written, never counted
  seq.tokens.pop_back();
  seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.end());
  return Status::Ok();
}

Status Scheduler::check_growth(const Sequence& seq, std::span<const int32_t> tokens,
                               int64_t num_tokens) const {
  const SeqId id = seq.id;
  if (tokens.empty() ||
      std::any_of(tokens.begin(), tokens.end(), [](int32_t t) { return t < 0; })) {
    return invalid(fmt::format("sequence {}: jump-forward tokens must be real ids", id));
  }
  const Request& req = requests_.at(seq.request_id);
  const int64_t num_outputs = num_tokens - seq.num_prompt_tokens;
  if (num_tokens > config_.max_model_len ||
      (req.spec.max_new_tokens > 0 && num_outputs > req.spec.max_new_tokens)) {
    return invalid(
        fmt::format("sequence {}: {} tokens would pass max_model_len = {} or max_new_tokens = {}",
                    id, num_tokens, config_.max_model_len, req.spec.max_new_tokens));
  }
  const auto num_slots = static_cast<int32_t>(num_tokens);
  if (!kv_.can_grow(id, num_slots)) {
    const KvBlocks needed = kv_.blocks_needed(id, num_slots), have = kv_.allocatable();
    return make_error(ErrorCode::kResourceExhausted,
                      fmt::format("sequence {}: {} (+{} sliding) more KV blocks needed, {} (+{} "
                                  "sliding) allocatable",
                                  id, needed.full, needed.sliding, have.full, have.sliding));
  }
  return Status::Ok();
}

void Scheduler::grow(SeqId id, int64_t num_tokens) {
  std::vector<BlockCopy> copies;
  kv_.grow(id, static_cast<int32_t>(num_tokens), copies);
  for (const BlockCopy& c : copies) pending_copies_.push_back({id, c});
}

Result<int32_t> Scheduler::set_draft(SeqId id, std::span<const int32_t> draft) {
  if (!in_flight_.empty() || placeholders_.contains(id)) {
    return invalid(fmt::format("sequence {}: cannot take drafts while a step is in flight", id));
  }
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("sequence {}: unknown", id));
  Sequence& seq = it->second;
  const Request& req = requests_.at(seq.request_id);
  if (!req.running || seq.num_draft_tokens != 0 || seq.num_uncomputed() != 1 ||
      seq.num_output_tokens() < 1) {
    return invalid(fmt::format(
        "sequence {}: drafts need a running sequence whose last token is an uncomputed output "
        "({} of {} computed, {} drafts)",
        id, seq.num_computed_tokens, seq.num_tokens(), seq.num_draft_tokens));
  }
  if (std::any_of(draft.begin(), draft.end(), [](int32_t t) { return t < 0; })) {
    return invalid(fmt::format("sequence {}: drafts must be real ids", id));
  }
  // Room for the drafts and the token sampled after the last one.
  int64_t room = static_cast<int64_t>(config_.max_model_len) - seq.num_tokens() - 1;
  if (req.spec.max_new_tokens > 0) {
    room = std::min<int64_t>(room, req.spec.max_new_tokens - seq.num_output_tokens() - 1);
  }
  const auto kept =
      static_cast<int32_t>(std::clamp<int64_t>(room, 0, static_cast<int64_t>(draft.size())));
  if (kept == 0) return 0;
  seq.tokens.insert(seq.tokens.end(), draft.begin(), draft.begin() + kept);
  seq.num_draft_tokens = kept;
  drafted_.push_back(id);
  return kept;
}

Status Scheduler::verify_draft(SeqId id, int32_t num_accepted) {
  if (!in_flight_.empty() || placeholders_.contains(id)) {
    return invalid(fmt::format("sequence {}: cannot verify drafts while a step is in flight", id));
  }
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("sequence {}: unknown", id));
  Sequence& seq = it->second;
  const int32_t k = seq.num_draft_tokens;
  if (!requests_.at(seq.request_id).running || k == 0 || seq.num_uncomputed() != k) {
    return invalid(
        fmt::format("sequence {}: no computed drafts to verify ({} drafts, {} of {} computed)", id,
                    k, seq.num_computed_tokens, seq.num_tokens()));
  }
  if (num_accepted < 0 || num_accepted > k) {
    return invalid(fmt::format("sequence {}: {} of {} drafts accepted", id, num_accepted, k));
  }
  drop_drafts(seq, k - num_accepted);
  seq.num_draft_tokens = 0;
  seq.num_computed_tokens += num_accepted;
  kv_.commit(seq.id, seq.tokens, seq.num_computed_tokens);
  kv_.shrink(seq.id, seq.num_computed_tokens);
  std::erase(drafted_, id);
  return Status::Ok();
}

SeqId Scheduler::fork_unchecked(Sequence& parent, Request& req) {
  SeqId child_id = next_seq_id_++;
  Sequence child = parent;
  child.id = child_id;
  if (kv_.contains(parent.id)) kv_.fork(parent.id, child_id);
  seqs_.emplace(child_id, std::move(child));
  req.seqs.push_back(child_id);
  return child_id;
}

Result<SeqId> Scheduler::fork(SeqId parent) {
  if (!in_flight_.empty())
    return internal(fmt::format("fork({}) while a step is in flight", parent));
  auto it = seqs_.find(parent);
  if (it == seqs_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("sequence {}: unknown", parent));
  Request& req = requests_.at(it->second.request_id);
  if (static_cast<int32_t>(req.seqs.size()) >= req.spec.num_seqs) {
    return invalid(fmt::format("request {}: already has num_seqs = {} sequences", req.spec.id,
                               req.spec.num_seqs));
  }
  return fork_unchecked(it->second, req);
}

Result<std::vector<SeqId>> Scheduler::branch(RequestId id, std::span<const Branch> branches) {
  if (!in_flight_.empty())
    return internal(fmt::format("branch(request {}) while a step is in flight", id));
  auto rit = requests_.find(id);
  if (rit == requests_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("request {}: unknown", id));
  Request& req = rit->second;
  if (branches.empty() || static_cast<int32_t>(branches.size()) > req.spec.num_seqs) {
    return invalid(fmt::format("request {}: {} branches, expected 1..{}", id, branches.size(),
                               req.spec.num_seqs));
  }
  std::unordered_set<SeqId> parents;
  for (const Branch& b : branches) {
    auto sit = seqs_.find(b.parent);
    if (sit == seqs_.end() || sit->second.request_id != id) {
      return invalid(
          fmt::format("request {}: branch parent {} is not one of its sequences", id, b.parent));
    }
    if (!req.running || sit->second.num_uncomputed() != 0 ||
        sit->second.num_tokens() >= config_.max_model_len) {
      return invalid(fmt::format("request {}: sequence {} cannot take a token now", id, b.parent));
    }
    parents.insert(b.parent);
  }
  std::vector<SeqId> live = req.seqs;
  for (SeqId s : live) {
    if (!parents.contains(s)) drop_seq(req, s, SeqEndReason::kDropped);
  }
  // Fork before appending, so that forks copy the parent's tokens without the new one.
  std::vector<SeqId> targets;
  std::unordered_set<SeqId> used;
  for (const Branch& b : branches) {
    bool first = used.insert(b.parent).second;
    targets.push_back(first ? b.parent : fork_unchecked(seqs_.at(b.parent), req));
  }
  for (size_t i = 0; i < branches.size(); ++i)
    seqs_.at(targets[i]).tokens.push_back(branches[i].token);
  return targets;
}

void Scheduler::drop_seq(Request& req, SeqId id, SeqEndReason reason) {
  if (kv_.contains(id)) kv_.free(id);
  Sequence& seq = seqs_.at(id);
  drop_drafts(seq, seq.num_draft_tokens);
  ahead_drafts_.erase(id);
  placeholders_.erase(id);
  finished_.push_back({req.spec.id, id, reason, std::move(seq.tokens), seq.num_prompt_tokens});
  seqs_.erase(id);
  std::erase(req.seqs, id);
}

void Scheduler::remove_request(Request& req) {
  running_.erase(queue_key(req));
  waiting_.erase(queue_key(req));
  requests_.erase(req.spec.id);
}

Status Scheduler::finish(SeqId id, SeqEndReason reason) {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("sequence {}: unknown", id));
  Request& req = requests_.at(it->second.request_id);
  drop_seq(req, id, reason);
  if (req.seqs.empty()) remove_request(req);
  return Status::Ok();
}

Status Scheduler::finish_request(RequestId id, SeqEndReason reason) {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("request {}: unknown", id));
  Request& req = it->second;
  std::vector<SeqId> live = req.seqs;
  for (SeqId s : live) drop_seq(req, s, reason);
  remove_request(req);
  return Status::Ok();
}

Status Scheduler::abort(RequestId id) {
  return finish_request(id, SeqEndReason::kAbort);
}

const Sequence* Scheduler::sequence(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

const Request* Scheduler::request(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats st;
  st.num_running_requests = running_.size();
  st.num_waiting_requests = waiting_.size();
  st.num_running_seqs = kv_.num_seqs();
  st.num_preemptions = num_preemptions_;
  st.kv = kv_.stats();
  return st;
}

Status Scheduler::check_request(const Request& req) const {
  const RequestId id = req.spec.id;
  const RequestQueue& home = req.running ? running_ : waiting_;
  const RequestQueue& other = req.running ? waiting_ : running_;
  if (!home.contains(queue_key(req)) || other.contains(queue_key(req))) {
    return internal(fmt::format("request {}: wrong queue membership", id));
  }
  if (req.seqs.empty() || static_cast<int32_t>(req.seqs.size()) > req.spec.num_seqs) {
    return internal(fmt::format("request {}: {} live sequences", id, req.seqs.size()));
  }
  for (SeqId s : req.seqs) {
    auto it = seqs_.find(s);
    if (it == seqs_.end() || it->second.request_id != id)
      return internal(fmt::format("request {}: bad sequence {}", id, s));
    const Sequence& seq = it->second;
    const auto pending =
        static_cast<size_t>(std::count(seq.tokens.begin(), seq.tokens.end(), kPendingToken));
    const bool has_placeholder = placeholders_.contains(s);
    if (pending != (has_placeholder ? 1u : 0u)) {
      return internal(fmt::format("sequence {}: {} pending tokens, {} placeholders recorded", s,
                                  pending, has_placeholder ? 1 : 0));
    }
    if (seq.num_draft_tokens < 0 ||
        (seq.num_draft_tokens > 0 &&
         (!req.running || seq.num_uncomputed() < seq.num_draft_tokens ||
          seq.num_uncomputed() > seq.num_draft_tokens + 1 ||
          std::find(drafted_.begin(), drafted_.end(), s) == drafted_.end()))) {
      return internal(fmt::format("sequence {}: {} drafts with {} of {} tokens computed", s,
                                  seq.num_draft_tokens, seq.num_computed_tokens, seq.num_tokens()));
    }
    if (seq.num_computed_tokens < 0 || seq.num_computed_tokens > seq.num_tokens()) {
      return internal(fmt::format("sequence {}: {} computed of {} tokens", s,
                                  seq.num_computed_tokens, seq.num_tokens()));
    }
    if (req.running != kv_.contains(s))
      return internal(fmt::format("sequence {}: KV table presence", s));
    if (req.running ? kv_.num_computed_tokens(s) != seq.num_computed_tokens
                    : seq.num_computed_tokens != 0) {
      return internal(fmt::format("sequence {}: computed count disagrees with the KV manager", s));
    }
  }
  return Status::Ok();
}

Status Scheduler::check_invariants() const {
  PAGODA_RETURN_IF_ERROR(kv_.check_invariants());
  size_t num_seqs = 0;
  for (const auto& [id, req] : requests_) {
    PAGODA_RETURN_IF_ERROR(check_request(req));
    num_seqs += req.seqs.size();
  }
  if (num_seqs != seqs_.size() ||
      static_cast<size_t>(running_.size() + waiting_.size()) != requests_.size()) {
    return internal("sequences or queue entries without a request");
  }
  int32_t running_seqs = 0;
  for (const QueueKey& k : running_)
    running_seqs += static_cast<int32_t>(requests_.at(k.id).seqs.size());
  if (running_seqs != kv_.num_seqs()) return internal("KV tables without a running sequence");
  if (num_running_seats() > config_.max_num_seqs) {
    return internal(fmt::format("{} running seats exceed max_num_seqs = {}", num_running_seats(),
                                config_.max_num_seqs));
  }
  return Status::Ok();
}

}  // namespace pagoda
