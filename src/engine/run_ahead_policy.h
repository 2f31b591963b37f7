// The adaptive rule of async scheduling: whether a step that could be planned
// ahead (step N+1 launched while N runs) should be.
//
// Running ahead hides the host's step work behind the device step, but a
// request that arrives while step N runs then joins step N+2, not N+1: one
// decode step more of TTFT (bench/NOTES.md v3: W3 TTFT p50 at 1 req/s
// 9.2 -> 14.0 ms on an H200). So the engine plans step N+1 after N's samples
// (as with --no-async-scheduling) when both
//   * the step is small: fewer than RunAheadConfig::small_batch sequences, and
//   * a busy arrival was seen within the last RunAheadConfig::arrival_window_s
//     seconds of the engine's clock: a request admitted while the engine
//     already had steps to run (one that finds it idle starts a step at once,
//     so running ahead never delays it; a lone request -- `bench latency` --
//     thus decodes fully overlapped).
// A saturated server (large batches) and a lone long decode stay ahead.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

namespace pagoda {

struct RunAheadConfig {
  // Steps of at least this many sequences always run ahead; 0: every step
  // does (the rule off). 16: a decode-graph step's host time is tens of µs
  // at such batches (W1 16 µs, bench/NOTES.md v3), under 1% of a ~5 ms
  // step, while running ahead costs each arrival a whole step; a saturated
  // server runs batches far above it (up to max_num_seqs).
  int64_t small_batch = 16;
  // How long after a busy arrival small steps wait for their predecessor.
  // The busy arrival that opens the window still joins step N+2, so the
  // window must span the gaps between busy arrivals: at 1 req/s with ~1 s
  // requests (W3) about half the arrivals are busy, and a busy one finds no
  // busy one in the 5 s before it with probability ~e^-2.5 = 8% (2 s:
  // e^-1 = 37%). Holding costs a small step only its unhidden host time
  // (tens of µs of a ~5 ms decode step), so a long window is cheap.
  double arrival_window_s = 5.0;
};

class RunAheadPolicy {
 public:
  using Config = RunAheadConfig;
  using Clock = std::chrono::steady_clock;  // the engine's (request_state.h)
  using NowFn = std::function<Clock::time_point()>;

  // now: the engine's clock (null: Clock::now); tests give a fake one.
  explicit RunAheadPolicy(Config config = {}, NowFn now = {});

  // A request was admitted while the engine had steps to run.
  void on_busy_arrival();
  // Whether a step of num_seqs sequences, eligible to run ahead, should.
  bool run_ahead(size_t num_seqs) const;

 private:
  Config config_;
  NowFn now_;
  std::optional<Clock::time_point> last_busy_arrival_;
};

}  // namespace pagoda
