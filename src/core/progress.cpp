#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/log.h"

namespace pagoda {

Progress::Progress(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t done, std::string detail) {
  done_ = done;
  detail_ = std::move(detail);
  draw(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void Progress::draw(bool final) {
  if (!enabled_) return;
  const double frac = total_ ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - start_).count();
  if (tty_) {
    if (!final && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    std::string bar(static_cast<size_t>(frac * kWidth), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %5.1f%% %s %.1fs%s", label_.c_str(), bar.c_str(),
                 frac * 100.0, detail_.c_str(), secs, final ? "\n" : "");
    std::fflush(stderr);
    return;
  }
  const int decile = static_cast<int>(frac * 10.0);
  if (decile > last_decile_ || (final && decile < 10)) {
    last_decile_ = decile;
    log_info("{}: {:.0f}% ({}, {:.1f}s)", label_, frac * 100.0, detail_, secs);
  }
}

}  // namespace pagoda
