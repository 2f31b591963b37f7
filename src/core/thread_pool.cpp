#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda {
namespace {

thread_local bool t_in_pool_task = false;

class ThreadPool {
 public:
  explicit ThreadPool(int n) {
    for (int i = 0; i < n - 1; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs job(i) for i in [0, num_jobs) on the workers and the caller.
  void run(int num_jobs, const std::function<void(int)>& job) {
    std::unique_lock<std::mutex> call_lock(call_mu_);  // one parallel region at a time
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &job;
      num_jobs_ = num_jobs;
      next_job_ = 0;
      pending_ = num_jobs;
      ++generation_;
    }
    cv_.notify_all();
    drain();
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void drain() {
    t_in_pool_task = true;
    for (;;) {
      int i;
      const std::function<void(int)>* job;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (job_ == nullptr || next_job_ >= num_jobs_) break;
        i = next_job_++;
        job = job_;
      }
      (*job)(i);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
    t_in_pool_task = false;
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
        if (stop_) return;
        seen = generation_;
      }
      drain();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex call_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  int num_jobs_ = 0;
  int next_job_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

ThreadPool& global_pool() {
  static ThreadPool pool(num_cpu_threads());
  return pool;
}

}  // namespace

namespace {

// The requested size (0: none), and whether num_cpu_threads() has fixed it.
std::atomic<int> g_requested_threads{0};
std::atomic<bool> g_threads_fixed{false};

}  // namespace

bool set_num_cpu_threads(int n) {
  if (n < 1 || g_threads_fixed.load()) return false;
  g_requested_threads.store(n);
  return !g_threads_fixed.load();
}

int num_cpu_threads() {
  static int n = [] {
    g_threads_fixed.store(true);
    if (int requested = g_requested_threads.load(); requested > 0) return requested;
    if (const char* s = std::getenv("PAGODA_NUM_THREADS")) {
      int v = std::atoi(s);
      if (v > 0) return v;
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return n;
}

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  int threads = num_cpu_threads();
  int64_t max_jobs = (n + min_chunk - 1) / min_chunk;
  int num_jobs = static_cast<int>(std::min<int64_t>(max_jobs, threads));
  if (num_jobs <= 1 || t_in_pool_task) {
    fn(0, n);
    return;
  }
  int64_t chunk = (n + num_jobs - 1) / num_jobs;
  global_pool().run(num_jobs, [&](int i) {
    int64_t lo = i * chunk;
    int64_t hi = std::min(n, lo + chunk);
    if (lo < hi) fn(lo, hi);
  });
}

}  // namespace pagoda
