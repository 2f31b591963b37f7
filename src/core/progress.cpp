#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/log.h"

namespace pagoda {

Progress::Progress(std::string label, uint64_t total_bytes, uint64_t total_items)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      total_items_(total_items),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::advance(uint64_t bytes, uint64_t items) {
  bytes_ += bytes;
  items_ += items;
  draw(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void Progress::draw(bool final) {
  double frac = total_bytes_ ? static_cast<double>(bytes_) / static_cast<double>(total_bytes_) : 1.0;
  auto now = std::chrono::steady_clock::now();
  double secs = std::chrono::duration<double>(now - start_).count();
  double gib = static_cast<double>(bytes_) / (1024.0 * 1024.0 * 1024.0);
  double total_gib = static_cast<double>(total_bytes_) / (1024.0 * 1024.0 * 1024.0);
  if (tty_) {
    if (!final && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    int width = 30;
    int filled = static_cast<int>(frac * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(static_cast<size_t>(width), '.');
    std::fprintf(stderr, "\r%s [%s] %5.1f%% %.2f/%.2f GiB %llu/%llu tensors %.1fs%s", label_.c_str(),
                 bar.c_str(), frac * 100.0, gib, total_gib,
                 static_cast<unsigned long long>(items_), static_cast<unsigned long long>(total_items_),
                 secs, final ? "\n" : "");
    std::fflush(stderr);
    return;
  }
  int decile = static_cast<int>(frac * 10.0);
  if (final || decile > last_decile_) {
    last_decile_ = decile;
    if (final || decile < 10)
      log_info("{}: {:.0f}% ({:.2f}/{:.2f} GiB, {}/{} tensors, {:.1f}s)", label_, frac * 100.0, gib,
               total_gib, items_, total_items_, secs);
  }
}

}  // namespace pagoda
