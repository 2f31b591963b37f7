// ParallelRunner mechanics with test-double ranks: every call runs on the
// rank's own thread, errors of one rank come back naming it and end the
// runner, a rank failing in create or launch while its peers wait for it in
// collectives (cpu communicators; TP=2, TP=4, PP=2) releases them through the
// abort instead of hanging, divergent samples or logits are caught, and the
// KV sizes are the ranks' minimum. Also prints the handoff latency a
// launch + collect adds over no-op ranks.
#include "model/parallel_runner.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "finishes_within.h"
#include "parallel/cpu_communicator.h"

namespace pagoda {
namespace {

// A rank that samples token `base + row` for every logits row of a step,
// records the threads it was called on, and fails where told.
class FakeRank final : public Runner {
 public:
  struct Plan {
    int32_t token_offset = 0;   // added to every sampled token
    float logit_offset = 0.0f;  // added to every logit
    bool fail_launch = false;
    bool fail_collect = false;
    int64_t num_kv_blocks = 100;
    int64_t max_model_len = 512;
    // Run by launch() after its checks, in place of a forward (e.g. the
    // collectives a real rank's forward runs); its error is launch's.
    std::function<Status()> forward;
  };
  FakeRank(Plan plan, std::set<std::thread::id>* threads, std::mutex* mu)
      : plan_(plan), threads_(threads), mu_(mu) {
    note_thread();
  }
  ~FakeRank() override { note_thread(); }

  int64_t num_kv_blocks() const override { return plan_.num_kv_blocks; }
  const std::string& kv_sizing() const override { return sizing_; }
  int64_t num_sliding_kv_blocks() const override { return 0; }
  int64_t kv_block_bytes() const override { return 4096; }
  int64_t sliding_kv_block_bytes() const override { return 0; }
  DType kv_cache_dtype() const override { return DType::kF32; }
  const std::string& kv_scales_source() const override { return no_scales_; }
  int block_size() const override { return 16; }
  int64_t max_model_len() const override { return plan_.max_model_len; }
  int64_t max_num_batched_tokens() const override { return 64; }
  int64_t max_num_seqs() const override { return 8; }
  const std::vector<int64_t>& decode_graph_sizes() const override { return graphs_; }
  int64_t last_graph_batch_size() const override { return 0; }
  double last_step_wait_seconds() const override { return 0.25; }

  Status execute(const StepBatch& step, SampleOutput* out) override {
    PAGODA_RETURN_IF_ERROR(launch(step, 0));
    return collect(0, out);
  }
  Status launch(const StepBatch& step, int slot) override {
    note_thread();
    if (plan_.fail_launch) return make_error(ErrorCode::kInvalidArgument, "step input: bad step");
    if (active_[static_cast<size_t>(slot)]) return make_error(ErrorCode::kInternal, "slot busy");
    if (plan_.forward) PAGODA_RETURN_IF_ERROR(plan_.forward());
    active_[static_cast<size_t>(slot)] = true;
    rows_[static_cast<size_t>(slot)] = static_cast<int64_t>(step.logits_rows.size());
    return {};
  }
  Status collect(int slot, SampleOutput* out) override {
    note_thread();
    if (!active_[static_cast<size_t>(slot)])
      return make_error(ErrorCode::kInternal, "nothing launched");
    active_[static_cast<size_t>(slot)] = false;
    if (plan_.fail_collect) return make_error(ErrorCode::kInternal, "device lost");
    out->token_ids.clear();
    for (int64_t r = 0; r < rows_[static_cast<size_t>(slot)]; ++r) {
      out->token_ids.push_back(static_cast<int32_t>(10 + r) + (r == 1 ? plan_.token_offset : 0));
    }
    return {};
  }
  Status launch_sampling(int slot, const SamplingBatch& batch) override {
    note_thread();
    if (!active_[static_cast<size_t>(slot)])
      return make_error(ErrorCode::kInternal, "nothing launched");
    rows_[static_cast<size_t>(slot)] = static_cast<int64_t>(batch.rows.size());
    return {};
  }
  Status execute_logits(const StepBatch& step, std::vector<float>* logits) override {
    note_thread();
    logits->assign(step.logits_rows.size() * 4, 1.0f + plan_.logit_offset);
    return {};
  }
  bool any_active() const { return active_[0] || active_[1]; }

 private:
  void note_thread() {
    std::lock_guard<std::mutex> lock(*mu_);
    threads_->insert(std::this_thread::get_id());
  }
  Plan plan_;
  std::set<std::thread::id>* threads_;
  std::mutex* mu_;
  std::string sizing_ = "test";
  std::string no_scales_;
  std::vector<int64_t> graphs_;
  std::array<bool, 2> active_{};
  std::array<int64_t, 2> rows_{};
};

struct Ranks {
  std::vector<FakeRank::Plan> plans;
  std::vector<std::set<std::thread::id>> threads;
  std::mutex mu;
  std::vector<std::string> create_errors;  // "" = create succeeds

  explicit Ranks(int n)
      : plans(static_cast<size_t>(n)),
        threads(static_cast<size_t>(n)),
        create_errors(static_cast<size_t>(n)) {}

  Result<std::unique_ptr<ParallelRunner>> make() {
    return ParallelRunner::create(
        static_cast<int>(plans.size()), [this](int r) -> Result<std::unique_ptr<Runner>> {
          const size_t i = static_cast<size_t>(r);
          if (!create_errors[i].empty()) return make_error(ErrorCode::kNotFound, create_errors[i]);
          return std::unique_ptr<Runner>(std::make_unique<FakeRank>(plans[i], &threads[i], &mu));
        });
  }
};

StepBatch step_with_rows(int rows) {
  StepBatch step;
  for (int r = 0; r < rows; ++r) step.logits_rows.push_back(r);
  return step;
}

TEST(ParallelRunner, RunsEachRankOnItsOwnThreadAndReturnsRankZerosSamples) {
  Ranks ranks(3);
  ranks.plans[1].num_kv_blocks = 40;
  ranks.plans[2].max_model_len = 256;
  auto p = ranks.make();
  ASSERT_TRUE(p.ok()) << p.error().message;
  ParallelRunner& runner = *p.value();
  EXPECT_EQ(runner.size(), 3);
  EXPECT_EQ(runner.num_kv_blocks(), 40);     // the minimum over the ranks
  EXPECT_EQ(runner.max_model_len(), 256);    // the minimum over the ranks
  EXPECT_EQ(runner.kv_block_bytes(), 4096);  // per rank
  EXPECT_EQ(runner.last_step_wait_seconds(), 0.25);

  const StepBatch a = step_with_rows(3);
  const StepBatch b = step_with_rows(2);
  ASSERT_TRUE(runner.launch(a, 0).ok());
  ASSERT_TRUE(runner.launch(b, 1).ok());
  SampleOutput out;
  ASSERT_TRUE(runner.collect(0, &out).ok());
  EXPECT_EQ(out.token_ids, (std::vector<int32_t>{10, 11, 12}));
  ASSERT_TRUE(runner.collect(1, &out).ok());
  EXPECT_EQ(out.token_ids, (std::vector<int32_t>{10, 11}));
  ASSERT_TRUE(runner.execute(a, &out).ok());
  EXPECT_EQ(out.token_ids, (std::vector<int32_t>{10, 11, 12}));
  std::vector<float> logits;
  ASSERT_TRUE(runner.execute_logits(a, &logits).ok());
  EXPECT_EQ(logits.size(), 12u);
  p.value().reset();

  // Creation, every call and destruction of a rank ran on one thread, its own.
  std::set<std::thread::id> seen;
  for (const auto& t : ranks.threads) {
    ASSERT_EQ(t.size(), 1u);
    EXPECT_NE(*t.begin(), std::this_thread::get_id());
    seen.insert(*t.begin());
  }
  EXPECT_EQ(seen.size(), 3u);
}

TEST(ParallelRunner, CreateFailsWithTheFirstFailingRanksErrorNamingIt) {
  Ranks ranks(4);
  ranks.create_errors[2] = "weight 'lm_head.weight' missing";
  ranks.create_errors[3] = "something else";
  auto p = ranks.make();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(p.error().message, "tensor-parallel rank 2: weight 'lm_head.weight' missing");
  // The ranks that were created were destroyed on their own threads.
  EXPECT_EQ(ranks.threads[0].size(), 1u);
  EXPECT_TRUE(ranks.threads[2].empty());
}

TEST(ParallelRunner, CreateRefusesSizeZero) {
  auto p = ParallelRunner::create(0, [](int) -> Result<std::unique_ptr<Runner>> {
    return make_error(ErrorCode::kInternal, "not called");
  });
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, "tensor-parallel size must be >= 1, got 0");
}

// Every later call returns the same error without reaching the ranks.
void expect_ended(ParallelRunner& runner, const std::string& message) {
  SampleOutput out;
  std::vector<float> logits;
  for (const Status& st : {runner.launch(step_with_rows(2), 1), runner.collect(0, &out),
                           runner.execute(step_with_rows(2), &out),
                           runner.execute_logits(step_with_rows(1), &logits)}) {
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().message, message);
  }
}

TEST(ParallelRunner, LaunchErrorOfOneRankNamesItAndEndsTheRunner) {
  Ranks ranks(2);
  ranks.plans[1].fail_launch = true;
  auto p = ranks.make();
  ASSERT_TRUE(p.ok());
  const StepBatch a = step_with_rows(2);
  Status st = p.value()->launch(a, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "tensor-parallel rank 1: step input: bad step");
  expect_ended(*p.value(), "tensor-parallel rank 1: step input: bad step");
}

TEST(ParallelRunner, LaunchErrorOfEveryRankAlikeComesBackAsIs) {
  Ranks ranks(2);
  ranks.plans[0].fail_launch = true;
  ranks.plans[1].fail_launch = true;
  auto p = ranks.make();
  ASSERT_TRUE(p.ok());
  Status st = p.value()->launch(step_with_rows(2), 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.error().message, "step input: bad step");
  expect_ended(*p.value(), "step input: bad step");
}

TEST(ParallelRunner, CollectErrorNamesTheRank) {
  Ranks ranks(2);
  ranks.plans[1].fail_collect = true;
  auto p = ranks.make();
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.value()->launch(step_with_rows(2), 0).ok());
  SampleOutput out;
  Status st = p.value()->collect(0, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "tensor-parallel rank 1: device lost");
}

TEST(ParallelRunner, DivergentTokensAreAnInternalErrorNamingTheRow) {
  Ranks ranks(3);
  ranks.plans[2].token_offset = 5;  // rank 2 samples another token at row 1
  auto p = ranks.make();
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.value()->launch(step_with_rows(3), 1).ok());
  SampleOutput out;
  Status st = p.value()->collect(1, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kInternal);
  EXPECT_EQ(st.error().message,
            "tensor-parallel ranks sampled different tokens at row 1: rank 0 sampled 11, rank 2 "
            "sampled 16");
  st = p.value()->execute(step_with_rows(2), &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("at row 1"), std::string::npos);
}

TEST(ParallelRunner, DivergentLogitsAreAnInternalError) {
  Ranks ranks(2);
  ranks.plans[1].logit_offset = 1e-6f;
  auto p = ranks.make();
  ASSERT_TRUE(p.ok());
  std::vector<float> logits;
  Status st = p.value()->execute_logits(step_with_rows(1), &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message,
            "tensor-parallel ranks computed different logits (rank 0 vs rank 1)");
}

// Not a bound (a shared CI machine varies): prints what one launch + collect
// pair costs over no-op ranks, the latency tensor parallelism adds per step.
TEST(ParallelRunner, HandoffLatency) {
  for (int n : {1, 2, 4}) {
    Ranks ranks(n);
    auto p = ranks.make();
    ASSERT_TRUE(p.ok());
    const StepBatch step = step_with_rows(1);
    SampleOutput out;
    constexpr int kSteps = 2000;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kSteps; ++i) {
      ASSERT_TRUE(p.value()->launch(step, i % 2).ok());
      ASSERT_TRUE(p.value()->collect(i % 2, &out).ok());
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    std::printf("[ handoff ] %d ranks: %.1f us per launch + collect (%u hardware threads)\n", n,
                us / kSteps, std::thread::hardware_concurrency());
  }
}

// The communicators of tp x pp ranks laid out as load_runner does: rank
// s * tp + t is in stage s's tp group and in the pp group of the ranks t.
struct Groups {
  RankResources resources;
  std::vector<Communicator*> tp, pp;  // [rank], null where there is none

  Groups(int tp_size, int pp_size)
      : tp(static_cast<size_t>(tp_size * pp_size)), pp(static_cast<size_t>(tp_size * pp_size)) {
    auto add = [&](const std::vector<int>& ranks, std::vector<Communicator*>& slot) {
      auto comms = create_cpu_communicators(static_cast<int>(ranks.size()));
      for (size_t i = 0; i < ranks.size(); ++i) {
        slot[static_cast<size_t>(ranks[i])] = comms[i].get();
        resources.communicators.push_back(std::move(comms[i]));
      }
    };
    for (int s = 0; tp_size > 1 && s < pp_size; ++s) {
      std::vector<int> ranks;
      for (int t = 0; t < tp_size; ++t) ranks.push_back(s * tp_size + t);
      add(ranks, tp);
    }
    for (int t = 0; pp_size > 1 && t < tp_size; ++t) {
      std::vector<int> ranks;
      for (int s = 0; s < pp_size; ++s) ranks.push_back(s * tp_size + t);
      add(ranks, pp);
    }
  }

  // What a rank's start-up or forward does with its peers: an all-reduce in
  // each of its groups and the stage hand-off (receive from the stage before,
  // send to the one after); then its communicators' first failure, as a
  // ModelRunner checks them.
  Status meet(int rank) const {
    std::vector<float> x(16, 1.0f);
    Tensor t(x.data(), DType::kF32, {16});
    Communicator* g[] = {tp[static_cast<size_t>(rank)], pp[static_cast<size_t>(rank)]};
    for (Communicator* c : g) {
      if (c != nullptr) c->all_reduce_sum(t);
    }
    if (Communicator* c = g[1]; c != nullptr) {
      if (c->rank() > 0) c->recv(t, c->rank() - 1);
      if (c->rank() + 1 < c->size()) c->send(t, c->rank() + 1);
    }
    for (Communicator* c : g) {
      if (c != nullptr && !c->status().ok()) return c->status();
    }
    return {};
  }
};

struct Shape {
  int tp, pp;
  std::string rank1;  // how errors name rank 1
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {
      {2, 1, "tensor-parallel rank 1"},
      {4, 1, "tensor-parallel rank 1"},
      {1, 2, "rank 1 (pipeline stage 1, tensor-parallel rank 0)"},
  };
  return all;
}

constexpr auto kLimit = std::chrono::seconds(20);

// Rank 1's create fails after `meetings` rounds of collectives that every
// rank joins; the others go on to meet again, where rank 1 never comes.
// Without the abort they would wait for it forever.
TEST(ParallelRunner, ARankFailingInCreateReleasesThePeersWaitingForIt) {
  for (const Shape& shape : shapes()) {
    for (int meetings : {0, 1}) {
      SCOPED_TRACE(shape.rank1 + " of tp " + std::to_string(shape.tp) + " x pp " +
                   std::to_string(shape.pp) + ", fails after " + std::to_string(meetings));
      EXPECT_TRUE(test::finishes_within(kLimit, [shape, meetings] {
        auto groups = std::make_shared<Groups>(shape.tp, shape.pp);
        auto ranks = std::make_shared<Ranks>(shape.tp * shape.pp);
        const ParallelRunner::RankFactory make = [=](int r) -> Result<std::unique_ptr<Runner>> {
          for (int m = 0; m < 2; ++m) {
            if (r == 1 && m == meetings)
              return make_error(ErrorCode::kResourceExhausted, "out of memory for the KV pool");
            PAGODA_RETURN_IF_ERROR(groups->meet(r));
          }
          return std::unique_ptr<Runner>(
              std::make_unique<FakeRank>(ranks->plans[static_cast<size_t>(r)],
                                         &ranks->threads[static_cast<size_t>(r)], &ranks->mu));
        };
        auto p = ParallelRunner::create(shape.tp * shape.pp, make, std::move(groups->resources),
                                        shape.pp);
        ASSERT_FALSE(p.ok());
        EXPECT_EQ(p.error().code, ErrorCode::kResourceExhausted);
        EXPECT_EQ(p.error().message, shape.rank1 + ": out of memory for the KV pool");
      }));
    }
  }
}

// A step that only rank 1 refuses: the others run its forward and wait in
// its collectives for rank 1.
TEST(ParallelRunner, ALaunchFailingOnOneRankReleasesThePeersAndEndsTheRunner) {
  for (const Shape& shape : shapes()) {
    SCOPED_TRACE(shape.rank1);
    EXPECT_TRUE(test::finishes_within(kLimit, [shape] {
      const int n = shape.tp * shape.pp;
      auto groups = std::make_shared<Groups>(shape.tp, shape.pp);
      auto ranks = std::make_shared<Ranks>(n);
      for (int r = 0; r < n; ++r) {
        ranks->plans[static_cast<size_t>(r)].forward = [groups, r] { return groups->meet(r); };
      }
      ranks->plans[1].fail_launch = true;
      const ParallelRunner::RankFactory make = [=](int r) -> Result<std::unique_ptr<Runner>> {
        return std::unique_ptr<Runner>(
            std::make_unique<FakeRank>(ranks->plans[static_cast<size_t>(r)],
                                       &ranks->threads[static_cast<size_t>(r)], &ranks->mu));
      };
      auto p = ParallelRunner::create(n, make, std::move(groups->resources), shape.pp);
      ASSERT_TRUE(p.ok()) << p.error().message;
      const Status st = p.value()->launch(step_with_rows(2), 0);
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.error().message, shape.rank1 + ": step input: bad step");
      expect_ended(*p.value(), shape.rank1 + ": step input: bad step");
    }));
  }
}

}  // namespace
}  // namespace pagoda
