// OpTimer: times a sequence of intervals, one per backend op, as the device
// runs them (ProfilingBackend brackets each op with begin / end).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace pagoda {

class OpTimer {
 public:
  virtual ~OpTimer() = default;
  // Interval i starts / ends here in the backend's op order. Intervals are
  // numbered 0, 1, ... from the last take(); begin(i) and end(i) bracket one
  // op, and intervals never nest.
  virtual void begin(size_t i) = 0;
  virtual void end(size_t i) = 0;
  // Waits for the device to finish every interval so far and returns their
  // durations in microseconds (element i: interval i); the numbering then
  // starts again at 0.
  virtual std::vector<double> take() = 0;
  // How the intervals are measured, for the report.
  virtual std::string method() const = 0;
};

// The host's steady clock around each op: exact for a backend whose ops run
// synchronously (cpu), meaningless for an asynchronous one.
class HostOpTimer final : public OpTimer {
 public:
  void begin(size_t i) override;
  void end(size_t i) override;
  std::vector<double> take() override;
  std::string method() const override;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point started_;
  std::vector<double> us_;
};

}  // namespace pagoda
