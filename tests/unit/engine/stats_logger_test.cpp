// engine/stats_logger.h: the periodic stats line (throughputs over the
// interval, state, hit rate), silence while idle, and the logger thread's
// period and prompt stop.
#include "engine/stats_logger.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace pagoda {
namespace {

TEST(StatsLine, NothingWhileIdle) {
  EngineMetrics before;
  before.prompt_tokens = 100;
  before.generation_tokens = 50;
  before.kv_usage = 0.5;  // cached blocks alone are no activity
  EXPECT_FALSE(format_stats_line(before, before, 10.0).has_value());
}

TEST(StatsLine, ThroughputsStateAndHitRateOfTheInterval) {
  EngineMetrics before;
  before.prompt_tokens = 100;
  before.generation_tokens = 50;
  before.prefix_cache_queries = 1000;
  before.prefix_cache_hits = 1000;
  EngineMetrics now = before;
  now.prompt_tokens += 200;      // 20 tokens/s over 10 s
  now.generation_tokens += 455;  // 45.5 tokens/s
  now.num_running = 3;
  now.num_waiting = 2;
  now.kv_usage = 0.125;
  now.prefix_cache_queries += 400;
  now.prefix_cache_hits += 100;  // 25% of this interval's lookups
  const auto line = format_stats_line(before, now, 10.0);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(
      *line,
      "engine stats: Avg prompt throughput: 20.0 tokens/s, Avg generation throughput: 45.5 "
      "tokens/s, "
      "Running: 3 reqs, Waiting: 2 reqs, KV cache usage: 12.5%, Prefix cache hit rate: 25.0%");
}

TEST(StatsLine, BusyWithoutNewTokensStillReports) {
  EngineMetrics before;
  EngineMetrics now;
  now.num_waiting = 1;  // e.g. a long prefill that has not finished yet
  const auto line = format_stats_line(before, now, 1.0);
  ASSERT_TRUE(line.has_value());
  EXPECT_NE(line->find("Avg prompt throughput: 0.0 tokens/s"), std::string::npos);
  EXPECT_NE(line->find("Waiting: 1 reqs"), std::string::npos);
  EXPECT_NE(line->find("Prefix cache hit rate: 0.0%"), std::string::npos);
}

TEST(StatsLogger, ReadsEveryIntervalAndStopsPromptly) {
  std::atomic<int> reads{0};
  {
    StatsLogger logger(
        [&reads] {
          ++reads;
          return EngineMetrics{};
        },
        std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  // One read at start, then one per 20 ms interval (the machine may be slow:
  // at least a few, never more than the intervals that fit).
  EXPECT_GE(reads.load(), 4);
  EXPECT_LE(reads.load(), 1 + 250 / 20 + 1);
  // A long interval does not delay the stop.
  const auto before_long = std::chrono::steady_clock::now();
  {
    StatsLogger logger([] { return EngineMetrics{}; }, std::chrono::hours(1));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - before_long, std::chrono::seconds(5));
}

}  // namespace
}  // namespace pagoda
