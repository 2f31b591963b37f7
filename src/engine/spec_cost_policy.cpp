#include "engine/spec_cost_policy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

#include "spec/backoff.h"

namespace pagoda {

SpecCostPolicy::SpecCostPolicy(double budget, NowFn now)
    : budget_(budget), now_(now ? std::move(now) : NowFn(&Clock::now)) {}

int32_t SpecCostPolicy::cap_for(double r, double budget) {
  if (!(r > 0.0) || !(budget > 0.0)) return SpecBackoff::kMinCap;
  // Clamped before the conversion: r / budget may be huge.
  const double steps = std::min(std::ceil(r / budget), double{SpecBackoff::kMaxCap});
  const auto cap = std::bit_ceil(static_cast<uint32_t>(steps));
  return std::clamp(static_cast<int32_t>(cap), SpecBackoff::kMinCap, SpecBackoff::kMaxCap);
}

void SpecCostPolicy::step_started() {
  start_ = now_();
}

void SpecCostPolicy::step_finished(size_t num_seqs, bool decode_only, StepKind kind) {
  const double seconds = std::chrono::duration<double>(now_() - start_).count();
  const double held_s = std::exchange(held_s_, 0.0);
  const int num_held = std::exchange(num_held_, 0);
  if (!decode_only || num_seqs == 0) return;
  switch (kind) {
    case StepKind::kPlain:
      record(num_seqs, seconds, false);
      break;
    case StepKind::kHeld:
      // A held step's time may be ~0 (the CPU computed it before): kept as is.
      held_s_ = seconds;
      num_held_ = 1;
      break;
    case StepKind::kVerifying:
      record(num_seqs, held_s + seconds, true, 1 + num_held);
      break;
  }
}

void SpecCostPolicy::record(size_t num_seqs, double seconds, bool verifying, int num_steps) {
  if (!(seconds > 0.0) || num_steps < 1) return;
  Averages& a = buckets_[bucket(num_seqs)];
  auto update = [](double& avg, double x) {
    avg = avg > 0.0 ? avg + kAverageWeight * (x - avg) : x;
  };
  if (!verifying) {
    update(a.plain_s, seconds);
    return;
  }
  update(a.verify_steps, static_cast<double>(num_steps));
  update(a.verify_s, seconds);
}

std::optional<double> SpecCostPolicy::extra_cost(size_t num_seqs) const {
  const Averages& a = buckets_[bucket(num_seqs)];
  if (a.plain_s <= 0.0 || a.verify_s <= 0.0) return std::nullopt;
  return a.verify_s / a.plain_s - a.verify_steps;
}

int32_t SpecCostPolicy::cap(size_t num_seqs) const {
  return cap_for(extra_cost(num_seqs).value_or(0.0), budget_);
}

size_t SpecCostPolicy::bucket(size_t num_seqs) {
  const size_t b = num_seqs <= 1 ? 0 : static_cast<size_t>(std::bit_width(num_seqs - 1));
  return std::min(b, kNumBuckets - 1);
}

}  // namespace pagoda
