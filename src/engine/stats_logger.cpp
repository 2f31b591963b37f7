#include "engine/stats_logger.h"

#include <fmt/format.h>

#include "core/log.h"

namespace pagoda {

std::optional<std::string> format_stats_line(const EngineMetrics& before, const EngineMetrics& now,
                                             double seconds) {
  const uint64_t prompt = now.prompt_tokens - before.prompt_tokens;
  const uint64_t generated = now.generation_tokens - before.generation_tokens;
  if (prompt == 0 && generated == 0 && now.num_running == 0 && now.num_waiting == 0)
    return std::nullopt;
  const double per_s = seconds > 0.0 ? 1.0 / seconds : 0.0;
  const uint64_t queries = now.prefix_cache_queries - before.prefix_cache_queries;
  const uint64_t hits = now.prefix_cache_hits - before.prefix_cache_hits;
  const double hit_rate =
      queries > 0 ? static_cast<double>(hits) / static_cast<double>(queries) : 0.0;
  return fmt::format(
      "engine stats: Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} "
      "tokens/s, "
      "Running: {} reqs, Waiting: {} reqs, KV cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%",
      static_cast<double>(prompt) * per_s, static_cast<double>(generated) * per_s, now.num_running,
      now.num_waiting, now.kv_usage * 100.0, hit_rate * 100.0);
}

StatsLogger::StatsLogger(std::function<EngineMetrics()> read,
                         std::chrono::duration<double> interval)
    : read_(std::move(read)), interval_(interval), thread_([this] { loop(); }) {}

StatsLogger::~StatsLogger() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StatsLogger::loop() {
  using Clock = std::chrono::steady_clock;
  EngineMetrics before = read_();
  Clock::time_point since = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto wake = since + std::chrono::duration_cast<Clock::duration>(interval_);
    if (cv_.wait_until(lock, wake, [this] { return stop_; })) return;
    lock.unlock();
    EngineMetrics now = read_();
    const Clock::time_point at = Clock::now();
    if (auto line =
            format_stats_line(before, now, std::chrono::duration<double>(at - since).count())) {
      log_info("{}", *line);
    }
    before = std::move(now);
    since = at;
    lock.lock();
  }
}

}  // namespace pagoda
