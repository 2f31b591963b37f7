// Randomized stress test: thousands of add / abort / step / branch / finish
// operations over a small KV pool. A fake model keeps a fake KV cache whose
// slot for position p holds a hash of the sequence's tokens [0, p]: every
// step it applies the copy-on-write pairs, writes the new tokens' slots and
// then "attends" over every position of every scheduled sequence, so a wrong
// slot, a missed copy, a bad prefix hit or an early eviction shows up as a
// wrong value. check_invariants() runs after every operation; at the end
// everything is freed. In the async mode a step is "launched" (the fake
// model runs, the device's order) and the next one planned with
// schedule_ahead() before the step's samples are resolved, as the engine
// does; placeholder tokens are filled by the fake device from the previous
// step's samples. With a sliding-window KV group the fake model also writes
// the sliding pool's slots and checks each step's window there, and that
// the entries before the window are released (null).
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>

#include "sched_harness.h"

namespace pagoda {
namespace {

using testing::expect_consistent;
using testing::fake_next_token;
using testing::Ids;
using testing::reference_output;

struct StressParams {
  uint32_t seed;
  int32_t budget;
  int32_t max_chunk;
  bool prefix_caching;
  bool async = false;  // schedule_ahead / resolve pipelining
  int32_t sliding_window = 0;  // > 0: a sliding group of kNumSlidingBlocks blocks
};

constexpr int32_t kNumSlidingBlocks = 16;

enum class GroupMode { kSingle, kParallel, kBeam };

struct Tracked {
  GroupMode mode = GroupMode::kSingle;
  Ids prompt;
  int32_t max_new_tokens = 0;
  bool branched = false;
};

class StressRun {
 public:
  explicit StressRun(const StressParams& p)
      : rng_(p.seed), async_(p.async), window_(p.sliding_window) {
    SchedulerConfig c;
    c.max_num_batched_tokens = p.budget;
    c.max_num_seqs = 8;
    c.max_waiting = 6;
    c.max_chunk_tokens = p.max_chunk;
    c.max_model_len = 40;
    c.kv = {.num_blocks = 24,
            .block_size = 4,
            .enable_prefix_caching = p.prefix_caching,
            .sliding_window = p.sliding_window,
            .num_sliding_blocks = p.sliding_window > 0 ? kNumSlidingBlocks : 0};
    sched_ = std::make_unique<Scheduler>(Scheduler::create(c).value());
    kv_values_.assign(24 * 4, 0);
    sliding_values_.assign(kNumSlidingBlocks * 4, 0);
  }

  void run(int32_t num_ops) {
    for (int32_t i = 0; i < num_ops && !::testing::Test::HasFailure(); ++i) {
      int32_t op = pick(0, 99);
      if (op < 30)
        add();
      else if (op < 34)
        abort_one();
      else if (op < 38)
        finish_one();
      else
        step();
      Status st = sched_->check_invariants();
      ASSERT_TRUE(st.ok()) << "op " << i << ": " << st.error().message;
    }
    if (running_) collect(*running_, false);
    running_.reset();
    for (auto& [id, t] : tracked_) ASSERT_TRUE(sched_->abort(id).ok());
    tracked_.clear();
    ASSERT_TRUE(sched_->check_invariants().ok());
    EXPECT_FALSE(sched_->has_unfinished());
    KvStats st = sched_->stats().kv;
    EXPECT_EQ(st.num_used_blocks, 0);
    EXPECT_EQ(st.num_free_blocks + st.num_cached_blocks, st.num_blocks);
    EXPECT_EQ(st.num_sliding_used_blocks, 0);
  }

  const SchedulerStats stats() const { return sched_->stats(); }
  int32_t num_finished_checked() const { return num_checked_; }
  int32_t num_ahead() const { return num_ahead_; }
  int64_t num_pending_filled() const { return num_pending_filled_; }
  int64_t num_window_checked() const { return num_window_checked_; }

 private:
  int32_t pick(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  void add() {
    Tracked t;
    int32_t len = pick(1, 20);
    // Few distinct prompt heads so that prefixes repeat across requests.
    int32_t head = pick(0, 2);
    for (int32_t i = 0; i < len; ++i) t.prompt.push_back(i < 9 ? head * 10 + i : pick(1, 3));
    t.mode = static_cast<GroupMode>(pick(0, 2));
    int32_t num_seqs = t.mode == GroupMode::kSingle
                           ? 1
                           : std::min(pick(2, 3), sched_->config().max_num_batched_tokens);
    t.max_new_tokens = pick(1, 16);
    RequestSpec spec{.id = next_id_,
                     .prompt_tokens = t.prompt,
                     .priority = pick(0, 2),
                     .num_seqs = num_seqs,
                     .max_new_tokens = t.max_new_tokens};
    auto r = sched_->add_request(std::move(spec));
    if (!r.ok()) {
      // Queue full, or a group too wide for the pool at its maximum length.
      bool expected = r.error().code == ErrorCode::kResourceExhausted ||
                      r.error().message.find("KV blocks") != std::string::npos;
      ASSERT_TRUE(expected) << r.error().message;
      return;
    }
    tracked_[next_id_++] = std::move(t);
  }

  RequestId random_request() {
    auto it = tracked_.begin();
    std::advance(it, pick(0, static_cast<int32_t>(tracked_.size()) - 1));
    return it->first;
  }

  void abort_one() {
    if (tracked_.empty()) return;
    RequestId id = random_request();
    ASSERT_TRUE(sched_->abort(id).ok());
    tracked_.erase(id);
  }

  void finish_one() {
    if (tracked_.empty()) return;
    RequestId id = random_request();
    const std::vector<SeqId>& seqs = sched_->request(id)->seqs;
    SeqId seq = seqs[pick(0, static_cast<int32_t>(seqs.size()) - 1)];
    end_seq(id, seq, SeqEndReason::kStop);
  }

  void end_seq(RequestId id, SeqId seq, SeqEndReason reason) {
    bool last = sched_->request(id)->seqs.size() == 1;
    ASSERT_TRUE(sched_->finish(seq, reason).ok());
    if (last) tracked_.erase(id);
  }

  // Applies copies, writes the new slots, then checks every attended slot.
  void run_fake_model(const ScheduleOutput& out) {
    const int32_t bs = 4;
    for (size_t i = 0; i < out.copy_src.size(); ++i) {
      for (int32_t j = 0; j < bs; ++j)
        kv_values_[out.copy_dst[i] * bs + j] = kv_values_[out.copy_src[i] * bs + j];
    }
    ASSERT_EQ(out.sliding_copy_src.size(), out.sliding_copy_dst.size());
    for (size_t i = 0; i < out.sliding_copy_src.size(); ++i) {
      for (int32_t j = 0; j < bs; ++j)
        sliding_values_[out.sliding_copy_dst[i] * bs + j] =
            sliding_values_[out.sliding_copy_src[i] * bs + j];
    }
    if (!out.empty()) ASSERT_EQ(out.sliding_block_tables.empty(), window_ == 0);
    std::set<SeqId> seen;
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      const ScheduledSeq& e = out.seqs[i];
      ASSERT_TRUE(seen.insert(e.seq_id).second) << "sequence scheduled twice";
      // The device's view: a placeholder holds the previous step's sample.
      Ids tokens = sched_->sequence(e.seq_id)->tokens;
      for (size_t p = 0; p < tokens.size(); ++p) {
        if (tokens[p] == kPendingToken) {
          tokens[p] = fake_next_token(std::span<const int32_t>(tokens.data(), p));
          ++num_pending_filled_;
        }
      }
      std::vector<uint64_t> prefix(out.seq_lens[i]);
      uint64_t h = 1469598103934665603ull;
      for (int32_t p = 0; p < out.seq_lens[i]; ++p)
        prefix[p] = h = (h ^ static_cast<uint64_t>(tokens[p])) * 1099511628211ull;
      for (int32_t p = e.start_position; p < out.seq_lens[i]; ++p) {
        kv_values_[out.slot_mapping[out.query_start_loc[i] + p - e.start_position]] = prefix[p];
        if (window_ > 0) {
          sliding_values_[out.sliding_slot_mapping[out.query_start_loc[i] + p - e.start_position]] =
              prefix[p];
        }
      }
      if (window_ > 0) check_window(out, i, prefix);
      const int32_t* row = out.block_tables.data() + i * out.max_blocks_per_seq;
      for (int32_t p = 0; p < out.seq_lens[i]; ++p) {
        ASSERT_EQ(kv_values_[row[p / bs] * bs + p % bs], prefix[p])
            << "seq " << e.seq_id << " position " << p;
      }
    }
  }

  // The step's first query (at start_position) reads the window behind it:
  // those entries hold the right values; every entry before it is null.
  void check_window(const ScheduleOutput& out, size_t i, const std::vector<uint64_t>& prefix) {
    const int32_t bs = 4;
    const ScheduledSeq& e = out.seqs[i];
    const int32_t* row = out.sliding_block_tables.data() + i * out.max_blocks_per_seq;
    const int32_t lowest = std::max(0, e.start_position - window_ + 1);
    for (int32_t b = 0; b < lowest / bs; ++b)
      ASSERT_EQ(row[b], kNullBlock) << "seq " << e.seq_id << " keeps block " << b;
    for (int32_t p = lowest; p < out.seq_lens[i]; ++p) {
      ASSERT_NE(row[p / bs], kNullBlock) << "seq " << e.seq_id << " position " << p;
      ASSERT_EQ(sliding_values_[row[p / bs] * bs + p % bs], prefix[p])
          << "seq " << e.seq_id << " sliding position " << p;
    }
    num_window_checked_ += lowest / bs;
  }

  // Sync: schedule, run, update. Async: launch a step if none runs, plan
  // and launch the next one ahead unless the running step branches, then
  // collect the running step.
  void step() {
    if (!running_) {
      ScheduleOutput out = sched_->schedule();
      expect_consistent(*sched_, out);
      run_fake_model(out);
      if (!async_) {
        collect(out, false);
        return;
      }
      running_ = std::move(out);
    }
    ScheduleOutput current = std::move(*running_);
    running_.reset();
    bool ahead = true;
    std::vector<SeqId> pending;
    for (const ScheduledSeq& e : current.seqs) {
      if (e.logits_index < 0 || !sched_->sequence(e.seq_id)) continue;
      const Tracked& t = tracked_.at(e.request_id);
      ahead &= !(t.mode == GroupMode::kBeam || (t.mode == GroupMode::kParallel && !t.branched));
      pending.push_back(e.seq_id);
    }
    if (ahead) {
      ScheduleOutput next = sched_->schedule_ahead(pending);
      expect_consistent(*sched_, next);
      run_fake_model(next);
      if (!next.empty()) running_ = std::move(next);
      ++num_ahead_;
    }
    collect(current, ahead);
  }

  // The samples of `out` (run earlier): resolve() when the next step was
  // planned ahead, else update() and the branches.
  void collect(const ScheduleOutput& out, bool ahead) {
    std::vector<SampledToken> sampled;
    std::map<RequestId, std::vector<SeqId>> branching;
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      const ScheduledSeq& e = out.seqs[i];
      const Sequence* seq = sched_->sequence(e.seq_id);
      if (e.logits_index < 0 || seq == nullptr) continue;  // finished or aborted since launch
      Tracked& t = tracked_.at(e.request_id);
      bool branch = t.mode == GroupMode::kBeam || (t.mode == GroupMode::kParallel && !t.branched);
      const int32_t token =
          fake_next_token(std::span<const int32_t>(seq->tokens.data(), static_cast<size_t>(out.seq_lens[i])));
      if (branch)
        branching[e.request_id].push_back(e.seq_id);
      else
        sampled.push_back({e.seq_id, token});
    }
    Status st = ahead ? sched_->resolve(sampled) : sched_->update(sampled);
    ASSERT_TRUE(st.ok()) << st.error().message;
    for (auto& [id, seqs] : branching) do_branch(id, seqs);
    finish_done();
  }

  void do_branch(RequestId id, const std::vector<SeqId>& sampled_seqs) {
    Tracked& t = tracked_.at(id);
    const Request* req = sched_->request(id);
    ASSERT_EQ(sampled_seqs.size(), req->seqs.size()) << "group did not sample in lockstep";
    std::vector<Branch> branches;
    int32_t n = pick(1, req->spec.num_seqs);
    for (int32_t i = 0; i < n; ++i) {
      branches.push_back(
          {sampled_seqs[pick(0, static_cast<int32_t>(sampled_seqs.size()) - 1)], pick(1, 3)});
    }
    auto r = sched_->branch(id, branches);
    ASSERT_TRUE(r.ok()) << r.error().message;
    t.branched = true;
  }

  // The engine's length stop: max_new_tokens or max_model_len.
  void finish_done() {
    std::vector<std::pair<RequestId, SeqId>> done;
    for (auto& [id, t] : tracked_) {
      for (SeqId s : sched_->request(id)->seqs) {
        const Sequence* q = sched_->sequence(s);
        if (q->num_output_tokens() >= t.max_new_tokens ||
            q->num_tokens() >= sched_->config().max_model_len) {
          done.push_back({id, s});
        }
      }
    }
    for (auto& [id, s] : done) {
      const Tracked& t = tracked_.at(id);
      if (t.mode == GroupMode::kSingle) {
        const Sequence* q = sched_->sequence(s);
        Ids out(q->tokens.begin() + q->num_prompt_tokens, q->tokens.end());
        ASSERT_EQ(out, reference_output(t.prompt, q->num_output_tokens())) << "request " << id;
        ++num_checked_;
      }
      end_seq(id, s, SeqEndReason::kLength);
    }
  }

  std::mt19937 rng_;
  bool async_ = false;
  std::optional<ScheduleOutput> running_;  // async: launched, samples not resolved yet
  int32_t num_ahead_ = 0;
  int64_t num_pending_filled_ = 0;
  std::unique_ptr<Scheduler> sched_;
  std::map<RequestId, Tracked> tracked_;
  std::vector<uint64_t> kv_values_;  // fake KV cache: one value per slot
  int32_t window_ = 0;
  std::vector<uint64_t> sliding_values_;  // the sliding group's fake KV cache
  int64_t num_window_checked_ = 0;        // null entries seen before a window
  RequestId next_id_ = 1;
  int32_t num_checked_ = 0;
};

void run_stress(bool async, bool sliding) {
  std::vector<StressParams> params = {
      {1, 16, 0, true, async},  {2, 16, 5, true, async}, {3, 4, 0, true, async},
      {4, 64, 0, false, async}, {5, 7, 3, true, async},  {6, 1, 0, true, async},
  };
  // Windows of 5 and 9 over blocks of 4 (a window start inside a block and
  // past two blocks).
  if (sliding) {
    for (size_t i = 0; i < params.size(); ++i) params[i].sliding_window = i % 2 ? 9 : 5;
  }
  int64_t preemptions = 0, hits = 0, checked = 0, ahead = 0, filled = 0, released = 0;
  for (const StressParams& p : params) {
    SCOPED_TRACE(::testing::Message() << "seed " << p.seed << " budget " << p.budget);
    StressRun run(p);
    run.run(3000);
    if (::testing::Test::HasFailure()) return;
    SchedulerStats st = run.stats();
    preemptions += st.num_preemptions;
    hits += st.kv.num_hit_tokens;
    checked += run.num_finished_checked();
    ahead += run.num_ahead();
    filled += run.num_pending_filled();
    released += run.num_window_checked();
  }
  // The workload must actually exercise preemption, prefix hits and finishes
  // (and, async, steps planned ahead).
  EXPECT_GT(preemptions, 20);
  EXPECT_GT(hits, 100);
  EXPECT_GT(checked, 100);
  if (async) {
    EXPECT_GT(ahead, 1000);
    EXPECT_GT(filled, 1000);  // placeholder tokens the fake device fed from samples
  }
  if (sliding) EXPECT_GT(released, 1000);
}

TEST(SchedulerStress, RandomOperationsKeepInvariantsAndFreeEverything) {
  run_stress(false, false);
}

TEST(SchedulerStress, AsyncSchedulingKeepsInvariantsAndOutputs) {
  run_stress(true, false);
}

TEST(SchedulerStress, SlidingWindowGroupKeepsTheWindowAndFreesTheRest) {
  run_stress(false, true);
}

TEST(SchedulerStress, SlidingWindowGroupWithAsyncScheduling) {
  run_stress(true, true);
}

}  // namespace
}  // namespace pagoda
