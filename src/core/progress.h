// Progress of long work (weight loading): a redrawn bar on a terminal,
// a log line every 10% otherwise. Thread-compatible, not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace pagoda {

class Progress {
 public:
  // `total_bytes` and `total_items` are what done() is measured against.
  Progress(std::string label, uint64_t total_bytes, uint64_t total_items);
  ~Progress();
  void advance(uint64_t bytes, uint64_t items = 1);
  void finish();

 private:
  void draw(bool final);

  std::string label_;
  uint64_t total_bytes_, total_items_;
  uint64_t bytes_ = 0, items_ = 0;
  int last_decile_ = -1;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pagoda
