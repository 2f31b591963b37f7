#include "bench/progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace pagoda::bench {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::update(int64_t num_done, int64_t num_failed) {
  done_ = num_done;
  failed_ = num_failed;
  draw(false);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void ProgressBar::draw(bool final) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  double secs = std::chrono::duration<double>(now - start_).count();
  double frac = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  if (tty_) {
    if (!final && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %lld/%lld requests, %lld failed, %.1fs%s", label_.c_str(),
                 bar.c_str(), static_cast<long long>(done_), static_cast<long long>(total_),
                 static_cast<long long>(failed_), secs, final ? "\n" : "");
    std::fflush(stderr);
    return;
  }
  int decile = static_cast<int>(frac * 10.0);
  if (decile <= last_decile_ && !final) return;
  if (final && decile <= last_decile_) return;
  last_decile_ = decile;
  std::fprintf(stderr, "%s: %lld/%lld requests, %lld failed, %.1fs\n", label_.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_),
               static_cast<long long>(failed_), secs);
}

}  // namespace pagoda::bench
