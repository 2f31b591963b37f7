#include "model/parallel_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

namespace pagoda {
namespace {

// How long a waiting thread spins before it sleeps in atomic::wait. A GPU
// step takes ~2 ms and the engine thread's host work between steps ~0.1-0.5
// ms, so a short spin catches most handoffs without a futex wake-up (which
// costs tens of microseconds when the sleeper must be rescheduled) while
// keeping idle ranks off the cores.
constexpr auto kSpin = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Returns the value of `a` once it differs from `old`.
uint32_t await_change(const std::atomic<uint32_t>& a, uint32_t old) {
  uint32_t v = a.load(std::memory_order_acquire);
  if (v != old) return v;
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    cpu_relax();
    v = a.load(std::memory_order_acquire);
    if (v != old) return v;
    if (i % 64 == 0 && std::chrono::steady_clock::now() > until) break;
  }
  for (;;) {
    a.wait(old, std::memory_order_acquire);
    v = a.load(std::memory_order_acquire);
    if (v != old) return v;
  }
}

}  // namespace

// One rank: its thread, its runner and the mailbox of the current job. The
// engine thread writes `job` and then bumps `posted`; the worker runs it,
// fills `result` (and `samples` / `logits`) and then sets `done` to the
// job's number. Those release/acquire pairs order every other access.
struct ParallelRunner::Worker {
  ParallelRunner* owner = nullptr;
  int rank = 0;
  std::thread thread;
  std::unique_ptr<Runner> runner;
  std::unique_ptr<Backend>* backend = nullptr;  // RankResources::backends[rank], if any
  Job job;
  std::atomic<uint32_t> posted{0};
  std::atomic<uint32_t> done{0};
  Status result;
  // This rank failed before any rank aborted the group: `result` is its own
  // error, not the echo of another rank's abort. Written under failure_mu_.
  bool primary = false;
  SampleOutput samples;
  std::vector<float> logits;

  Status run(const Job& j) {
    try {
      switch (j.op) {
        case Op::kCreate: {
          Result<std::unique_ptr<Runner>> r = (*j.make_rank)(rank);
          if (!r.ok()) return r.error();
          runner = std::move(r).value();
          return {};
        }
        case Op::kLaunch:
          return runner->launch(*j.step, j.slot);
        case Op::kCollect:
          return runner->collect(j.slot, &samples);
        case Op::kLaunchSampling:
          return runner->launch_sampling(j.slot, *j.sampling);
        case Op::kExecute:
          return runner->execute(*j.step, &samples);
        case Op::kExecuteLogits:
          return runner->execute_logits(*j.step, &logits);
        case Op::kDestroy:
          runner.reset();
          if (backend != nullptr) backend->reset();
          return {};
        case Op::kStop:
          return {};
      }
    } catch (const std::exception& e) {
      return make_error(ErrorCode::kInternal, e.what());
    }
    return {};
  }

  void loop() {
    uint32_t seen = 0;
    for (;;) {
      seen = await_change(posted, seen);
      const Job j = job;
      result = run(j);
      if (!result.ok() && j.op != Op::kDestroy && j.op != Op::kStop) owner->on_rank_failure(*this);
      done.store(seen, std::memory_order_release);
      done.notify_one();
      if (j.op == Op::kStop) return;
    }
  }
};

ParallelRunner::ParallelRunner(RankResources resources) : resources_(std::move(resources)) {}

Result<std::unique_ptr<ParallelRunner>> ParallelRunner::create(int size,
                                                               const RankFactory& make_rank,
                                                               RankResources resources,
                                                               int stages) {
  if (size < 1) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("tensor-parallel size must be >= 1, got {}", size));
  }
  if (stages < 1 || size % stages != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} pipeline stages do not divide {} ranks", stages, size));
  }
  std::unique_ptr<ParallelRunner> p(new ParallelRunner(std::move(resources)));
  p->stages_ = stages;
  for (int r = 0; r < size; ++r) {
    auto w = std::make_unique<Worker>();
    w->owner = p.get();
    w->rank = r;
    if (static_cast<size_t>(r) < p->resources_.backends.size()) {
      w->backend = &p->resources_.backends[static_cast<size_t>(r)];
    }
    w->thread = std::thread([raw = w.get()] { raw->loop(); });
    p->all_.push_back(w.get());
    p->workers_.push_back(std::move(w));
  }
  Job job;
  job.op = Op::kCreate;
  job.make_rank = &make_rank;
  p->run_on_all(job);
  if (Status st = p->first_error(/*name_rank_always=*/true); !st.ok()) return st.error();
  p->num_kv_blocks_ = p->workers_[0]->runner->num_kv_blocks();
  p->num_sliding_kv_blocks_ = p->workers_[0]->runner->num_sliding_kv_blocks();
  p->max_model_len_ = p->workers_[0]->runner->max_model_len();
  for (const auto& w : p->workers_) {
    p->num_kv_blocks_ = std::min(p->num_kv_blocks_, w->runner->num_kv_blocks());
    p->num_sliding_kv_blocks_ =
        std::min(p->num_sliding_kv_blocks_, w->runner->num_sliding_kv_blocks());
    p->max_model_len_ = std::min(p->max_model_len_, w->runner->max_model_len());
  }
  return p;
}

ParallelRunner::~ParallelRunner() {
  stop_workers();
}

void ParallelRunner::stop_workers() {
  if (workers_.empty()) return;
  Job job;
  job.op = Op::kDestroy;  // each runner, then its backend, on its own thread
  run_on_all(job);
  job.op = Op::kStop;
  run_on_all(job);
  for (auto& w : workers_) w->thread.join();
  all_.clear();
  workers_.clear();
  resources_.backends.clear();
  resources_.communicators.clear();
}

void ParallelRunner::run_on_all(const Job& job) {
  for (Worker* w : all_) {
    w->job = job;
    w->posted.fetch_add(1, std::memory_order_release);
    w->posted.notify_one();
  }
  for (Worker* w : all_) {
    const uint32_t seq = w->posted.load(std::memory_order_relaxed);
    while (await_change(w->done, seq - 1) != seq) {
    }
  }
}

void ParallelRunner::on_rank_failure(Worker& w) {
  std::lock_guard lock(failure_mu_);
  if (aborted_) return;  // an echo of the abort (or a failure racing it)
  w.primary = true;
  if (resources_.communicators.empty()) return;  // no collective to release
  aborted_ = true;
  const std::string why =
      fmt::format("{} failed: {}", describe_rank(w.rank), w.result.error().message);
  for (const auto& c : resources_.communicators) c->abort(why);
}

std::string ParallelRunner::describe_rank(int rank) const {
  if (stages_ == 1) return fmt::format("tensor-parallel rank {}", rank);
  const int per_stage = size() / stages_;
  return fmt::format("rank {} (pipeline stage {}, tensor-parallel rank {})", rank, rank / per_stage,
                     rank % per_stage);
}

Status ParallelRunner::first_error(bool name_rank_always) {
  const Worker* first = nullptr;  // the lowest primary failure
  const Worker* any = nullptr;
  bool all_alike = true;
  {
    std::lock_guard lock(failure_mu_);
    for (const auto& w : workers_) {
      if (w->result.ok()) {
        all_alike = false;
        continue;
      }
      if (any == nullptr) {
        any = w.get();
      } else if (w->result.error().message != any->result.error().message) {
        all_alike = false;
      }
      if (first == nullptr && w->primary) first = w.get();
    }
  }
  if (any == nullptr) return {};
  if (first == nullptr) first = any;  // not reached: the first failure is primary
  const Error& e = first->result.error();
  if (all_alike && !name_rank_always) {
    broken_ = e;
  } else {
    broken_ = make_error(e.code, fmt::format("{}: {}", describe_rank(first->rank), e.message));
  }
  return broken_;
}

Status ParallelRunner::check_same_samples() const {
  const size_t first = sampler();
  const std::vector<int32_t>& want = workers_[first]->samples.token_ids;
  for (size_t r = first + 1; r < workers_.size(); ++r) {
    const std::vector<int32_t>& got = workers_[r]->samples.token_ids;
    if (got.size() != want.size()) {
      return make_error(
          ErrorCode::kInternal,
          fmt::format("tensor-parallel ranks sampled different tokens: rank {} sampled {} rows, "
                      "rank {} {}",
                      first, want.size(), r, got.size()));
    }
    for (size_t i = 0; i < want.size(); ++i) {
      if (got[i] != want[i]) {
        return make_error(
            ErrorCode::kInternal,
            fmt::format("tensor-parallel ranks sampled different tokens at row {}: rank {} "
                        "sampled {}, rank {} sampled {}",
                        i, first, want[i], r, got[i]));
      }
    }
  }
  return {};
}

Runner& ParallelRunner::rank(int r) const {
  return *workers_.at(static_cast<size_t>(r))->runner;
}

const std::string& ParallelRunner::kv_sizing() const {
  return workers_[0]->runner->kv_sizing();
}
int64_t ParallelRunner::kv_block_bytes() const {
  int64_t most = 0;
  for (const auto& w : workers_) most = std::max(most, w->runner->kv_block_bytes());
  return most;
}
int64_t ParallelRunner::sliding_kv_block_bytes() const {
  int64_t most = 0;
  for (const auto& w : workers_) most = std::max(most, w->runner->sliding_kv_block_bytes());
  return most;
}
DType ParallelRunner::kv_cache_dtype() const {
  return workers_[0]->runner->kv_cache_dtype();
}
const std::string& ParallelRunner::kv_scales_source() const {
  return workers_[0]->runner->kv_scales_source();
}
int ParallelRunner::block_size() const {
  return workers_[0]->runner->block_size();
}
int64_t ParallelRunner::max_num_batched_tokens() const {
  return workers_[0]->runner->max_num_batched_tokens();
}
int64_t ParallelRunner::max_num_seqs() const {
  return workers_[0]->runner->max_num_seqs();
}
const std::vector<int64_t>& ParallelRunner::decode_graph_sizes() const {
  return workers_[0]->runner->decode_graph_sizes();
}
int64_t ParallelRunner::last_graph_batch_size() const {
  return workers_[0]->runner->last_graph_batch_size();
}
double ParallelRunner::last_step_wait_seconds() const {
  return workers_[sampler()]->runner->last_step_wait_seconds();
}

Status ParallelRunner::execute(const StepBatch& step, SampleOutput* out) {
  PAGODA_RETURN_IF_ERROR(broken_);
  Job job;
  job.op = Op::kExecute;
  job.step = &step;
  run_on_all(job);
  PAGODA_RETURN_IF_ERROR(first_error(/*name_rank_always=*/false));
  PAGODA_RETURN_IF_ERROR(check_same_samples());
  *out = std::move(workers_[sampler()]->samples);
  return {};
}

Status ParallelRunner::launch(const StepBatch& step, int slot) {
  PAGODA_RETURN_IF_ERROR(broken_);
  Job job;
  job.op = Op::kLaunch;
  job.step = &step;
  job.slot = slot;
  run_on_all(job);
  return first_error(/*name_rank_always=*/false);
}

Status ParallelRunner::launch_sampling(int slot, const SamplingBatch& batch) {
  PAGODA_RETURN_IF_ERROR(broken_);
  Job job;
  job.op = Op::kLaunchSampling;
  job.sampling = &batch;
  job.slot = slot;
  run_on_all(job);
  return first_error(/*name_rank_always=*/false);
}

Status ParallelRunner::collect(int slot, SampleOutput* out) {
  PAGODA_RETURN_IF_ERROR(broken_);
  Job job;
  job.op = Op::kCollect;
  job.slot = slot;
  run_on_all(job);
  PAGODA_RETURN_IF_ERROR(first_error(/*name_rank_always=*/false));
  PAGODA_RETURN_IF_ERROR(check_same_samples());
  *out = std::move(workers_[sampler()]->samples);
  return {};
}

Status ParallelRunner::execute_logits(const StepBatch& step, std::vector<float>* logits) {
  PAGODA_RETURN_IF_ERROR(broken_);
  Job job;
  job.op = Op::kExecuteLogits;
  job.step = &step;
  run_on_all(job);
  PAGODA_RETURN_IF_ERROR(first_error(/*name_rank_always=*/false));
  const size_t first = sampler();
  const std::vector<float>& want = workers_[first]->logits;
  for (size_t r = first + 1; r < workers_.size(); ++r) {
    const std::vector<float>& got = workers_[r]->logits;
    if (got.size() != want.size() ||
        std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) != 0) {
      return make_error(
          ErrorCode::kInternal,
          fmt::format("tensor-parallel ranks computed different logits (rank {} vs rank {})", first,
                      r));
    }
  }
  *logits = std::move(workers_[first]->logits);
  return {};
}

}  // namespace pagoda
