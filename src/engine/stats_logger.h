// Periodic engine stats in the log, like vLLM's LoggingStatLogger: every
// interval, one INFO line with the prompt and generation throughput since the
// previous line, the running and waiting requests, the KV cache usage and
// the prefix cache hit rate. An interval without activity (no token
// prefilled or generated, nothing running or waiting) writes nothing, so an
// idle server stays quiet.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/engine_api.h"

namespace pagoda {

// The line for the `seconds` between two snapshots, or nullopt when there
// was no activity. Throughputs are token deltas / seconds; the hit rate is
// over the prefix cache lookups of the interval (0 when none).
std::optional<std::string> format_stats_line(const EngineMetrics& before, const EngineMetrics& now,
                                             double seconds);

class StatsLogger {
 public:
  // Starts a thread that calls `read` every `interval` and logs
  // format_stats_line's line. `read` must be thread-safe.
  StatsLogger(std::function<EngineMetrics()> read, std::chrono::duration<double> interval);
  // Stops and joins the thread (at once, mid-interval).
  ~StatsLogger();
  StatsLogger(const StatsLogger&) = delete;
  StatsLogger& operator=(const StatsLogger&) = delete;

 private:
  void loop();

  std::function<EngineMetrics()> read_;
  std::chrono::duration<double> interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace pagoda
