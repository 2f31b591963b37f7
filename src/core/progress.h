// Progress of long work (weight loading, a benchmark's requests) toward a
// total: a bar redrawn in place on a terminal (at most every 100 ms), a log
// line at every 10% otherwise. Thread-compatible, not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace pagoda {

class Progress {
 public:
  // `enabled` false draws nothing.
  Progress(std::string label, uint64_t total, bool enabled = true);
  ~Progress();
  // Sets the units done (of `total`) and the text shown after the bar, e.g.
  // "1.20/16.06 GiB, 31/291 tensors".
  void update(uint64_t done, std::string detail);
  void finish();

 private:
  void draw(bool final);

  std::string label_;
  uint64_t total_;
  bool enabled_, tty_;
  uint64_t done_ = 0;
  std::string detail_;
  int last_decile_ = -1;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pagoda
