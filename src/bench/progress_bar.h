// A request-count progress bar on stderr: redrawn in place on a terminal
// (at most every 100 ms), one line per 10% otherwise. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace pagoda::bench {

class ProgressBar {
 public:
  // enabled = false draws nothing.
  ProgressBar(std::string label, int64_t total, bool enabled);
  ~ProgressBar() { finish(); }
  void update(int64_t num_done, int64_t num_failed);
  void finish();

 private:
  void draw(bool final);

  std::string label_;
  int64_t total_;
  bool enabled_, tty_;
  bool finished_ = false;
  int64_t done_ = 0, failed_ = 0;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pagoda::bench
