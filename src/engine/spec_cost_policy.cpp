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

void SpecCostPolicy::step_finished(size_t num_seqs, size_t num_verifying, bool decode_only,
                                   StepKind kind) {
  const double seconds = std::chrono::duration<double>(now_() - start_).count();
  const double held_s = std::exchange(held_s_, 0.0);
  const int num_held = std::exchange(num_held_, 0);
  if (!decode_only || num_seqs == 0) return;
  switch (kind) {
    case StepKind::kPlain:
      record(num_seqs, seconds, 0);
      break;
    case StepKind::kHeld:
      // A held step's time may be ~0 (the CPU computed it before): kept as is.
      held_s_ = seconds;
      num_held_ = 1;
      break;
    case StepKind::kVerifying:
      record(num_seqs, held_s + seconds, num_verifying, 1 + num_held);
      break;
  }
}

void SpecCostPolicy::record(size_t num_seqs, double seconds, size_t num_verifying,
                            int num_steps) {
  if (!(seconds > 0.0) || num_steps < 1 || num_seqs == 0) return;
  auto update = [](bool measured, double& avg, double x) {
    avg = measured ? avg + kAverageWeight * (x - avg) : x;
  };
  Averages& a = buckets_[bucket(num_seqs)];
  if (num_verifying == 0) {
    update(a.plain_s > 0.0, a.plain_s, seconds);
    return;
  }
  const bool first = !(a.verify_s > 0.0);
  update(!first, a.verify_steps, static_cast<double>(num_steps));
  update(!first, a.verify_s, seconds);
  // The share fit: split against the mean share before this window (the
  // first window starts the upper group).
  const double steps = static_cast<double>(num_steps);
  const double share =
      static_cast<double>(std::min(num_verifying, num_seqs)) / static_cast<double>(num_seqs) / steps;
  const bool high = first || share >= a.mean_share;
  update(!first, a.mean_share, share);
  Group& g = high ? a.high : a.low;
  update(g.measured, g.share, share);
  update(g.measured, g.step_s, seconds / steps);
  g.measured = true;
}

std::optional<double> SpecCostPolicy::extra_cost(size_t num_seqs) const {
  const Averages& a = buckets_[bucket(num_seqs)];
  if (!(a.verify_s > 0.0)) return std::nullopt;
  if (a.plain_s > 0.0) return a.verify_s / a.plain_s - a.verify_steps;
  // No plain step: the line through the two groups of verifying windows.
  if (!a.low.measured || !a.high.measured) return std::nullopt;
  const double spread = a.high.share - a.low.share;
  if (!(spread >= kMinSpread)) return std::nullopt;
  const double slope = (a.high.step_s - a.low.step_s) / spread;
  const double plain_s = a.low.step_s - slope * a.low.share;
  if (!(plain_s > 0.0)) return std::nullopt;
  // The aligned window of verify_steps steps (share 1 / verify_steps) less
  // that many plain steps: n (p + slope / n) / p - n = slope / p.
  return std::max(slope / plain_s, 0.0);
}

int32_t SpecCostPolicy::cap(size_t num_seqs) const {
  return cap_for(extra_cost(num_seqs).value_or(0.0), budget_);
}

size_t SpecCostPolicy::bucket(size_t num_seqs) {
  const size_t b = num_seqs <= 1 ? 0 : static_cast<size_t>(std::bit_width(num_seqs - 1));
  return std::min(b, kNumBuckets - 1);
}

}  // namespace pagoda
