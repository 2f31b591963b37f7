// The cost-aware cap of speculative decoding's back-off (spec/backoff.h).
//
// While drafts keep being rejected, a sample verifies once per `cap` steps
// (the back-off's aligned steady state), and each such step costs r plain
// steps more, where r = (verifying step time / plain step time) - 1 (with
// async scheduling: of its window, below). The
// expected overhead of misses is thus r / cap; the engine keeps it under a
// budget (SpeculativeConfig::miss_cost_budget, e.g. 0.04) with
//   cap = clamp(next_pow2(ceil(r / budget)), SpecBackoff::kMinCap, kMaxCap).
// r is small at batch 1 (a verifying step is memory-bound: ~0.1-0.3 there,
// so the cap stays 8 and bursty acceptance is caught soon) and ~1 at batch
// 64 of an 8B model (5 rows per sequence, compute-bound: cap 32).
//
// How steps are compared: only decode-only steps count (a prefill chunk
// would swamp them). A step's time is the wall time of the engine's step()
// that collected it, from its start to the sample's application. With async
// scheduling the step before a verifying one is held (not followed by one
// planned ahead: the drafts need its tokens), so a verification costs that
// step() too: where the device runs a step between launch and collect
// (CUDA), the held step() pays the host work the overlap hid, and the
// verifying one the drafting and launching no step before it hid; where
// launch computes the step (the CPU backend), the held step() computes
// nothing (its step ran in the step() before) and the verifying one
// computes the verifying step and the plain one planned ahead after it.
// So a measurement is a *window*: a plain step alone, or a verifying step
// with the held step before it (if any).
//
// The estimate, per batch-size bucket (the sequences in the step, rounded
// up to a power of two: 1, 2, 3-4, 5-8, ...), from exponential running
// averages (kAverageWeight) of plain step times and of window times and
// lengths: r = (window time / plain time) - window steps. The cap of a step
// is its bucket's.
//
// Where no step is plain -- every step has some verifying sequences, out
// of phase: samples ramping their waits up (1, 2, 4, ...), a busy server
// admitting a request every few steps, the cap changing with the batch --
// r comes from a line fit instead. A window of n steps over S sequences, V
// of them verifying, has a verifying share x = V / (S n) and a time per
// step y = time / n; step time is modelled as y = p (1 + r x), so that r is
// again the extra cost, in plain steps, of a window in which every
// sequence verifies (x = 1/n: n p + r p). The verifying windows are split
// in two groups, below and at or above the running mean share, each with
// running averages of x and y; the line through the two groups' means
// gives p (at x = 0) and r = slope / p. It needs the groups kMinSpread
// apart (the extrapolation scales noise by 1 / spread). It misses the part
// of a verification's cost that does not grow with the verifying rows
// (leaving the pure-decode graph), so it is a lower bound there; once plain
// steps are measured (the back-off's alignment makes them: a cap above the
// samples' ramp), the quotient above takes over.
// Until a bucket has one of the two (or with a budget of 0), its cap is
// kMinCap.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

namespace pagoda {

class SpecCostPolicy {
 public:
  using Clock = std::chrono::steady_clock;  // the engine's (request_state.h)
  using NowFn = std::function<Clock::time_point()>;

  // Weight of a new step time in its running average (and in the fit's
  // group averages and mean share): about the last 8 steps of a kind count (the context, and so a step's time, grows slowly; an
  // aligned verification comes once per cap steps at most).
  static constexpr double kAverageWeight = 0.125;
  // The least distance in x between the two groups' means for an estimate:
  // r extrapolates the line to x = 1 (x = 1/2 with a held step), so noise
  // in y is scaled by about 1 / spread; 1/32 is two of 64 sequences per step.
  static constexpr double kMinSpread = 1.0 / 32;

  // budget: the overhead misses may cost (0: the cap stays kMinCap).
  // now: the engine's clock (null: Clock::now); tests give a fake one.
  explicit SpecCostPolicy(double budget, NowFn now = {});

  // The rule: the cap for verifying steps that cost r plain steps more.
  // r <= 0 (or unmeasured: the caller passes 0) or budget <= 0: kMinCap.
  static int32_t cap_for(double r, double budget);

  // What a collected step was to the policy.
  enum class StepKind {
    kPlain,      // no row verified drafts, and the next step was not held for drafts
    kHeld,       // no row verified drafts; the next step drafts, so none ran ahead
    kVerifying,  // some row verified drafts
  };

  // An engine step starts (step()'s beginning).
  void step_started();
  // The step started last was collected: num_seqs sequences, num_verifying
  // of them verified drafts (kVerifying: > 0), whether every one had a
  // single new token or verified drafts (no prefill chunk), and its kind.
  // Records its time since step_started(): a held step's is kept for the
  // verifying step that follows it (dropped if a plain step or a prefill
  // chunk comes first).
  void step_finished(size_t num_seqs, size_t num_verifying, bool decode_only, StepKind kind);
  // Records a decode-only window directly: num_steps steps of num_seqs
  // sequences taking `seconds` in all, num_verifying sequences verifying
  // (0: a plain step).
  void record(size_t num_seqs, double seconds, size_t num_verifying, int num_steps = 1);

  // The back-off cap for a step of num_seqs sequences.
  int32_t cap(size_t num_seqs) const;
  // r of num_seqs' bucket (the extra cost of a window in which every
  // sequence verifies, in plain steps): the quotient of averages, or
  // without plain steps the line fit (>= 0); nullopt until one is measured.
  std::optional<double> extra_cost(size_t num_seqs) const;

 private:
  // Running averages of one group's windows.
  struct Group {
    bool measured = false;
    double share = 0.0;   // x: verifying sequences per sequence and step
    double step_s = 0.0;  // y: the window's time per step
  };
  struct Averages {
    double plain_s = 0.0;       // 0: none yet
    double verify_s = 0.0;      // a verification window's time (0: none yet)
    double verify_steps = 0.0;  // a window's steps (1: async off, 2: held + verifying)
    double mean_share = 0.0;    // running mean of x over verifying windows
    Group low, high;            // verifying windows below mean_share / at or above it
  };
  static constexpr size_t kNumBuckets = 17;  // up to 65536 sequences and beyond
  static size_t bucket(size_t num_seqs);

  double budget_;
  NowFn now_;
  Clock::time_point start_{};
  // The held step just before, waiting for the verifying step (0 steps: none).
  // Its sequences' count is the verifying step's (both decode the batch).
  double held_s_ = 0.0;
  int num_held_ = 0;
  std::array<Averages, kNumBuckets> buckets_{};
};

}  // namespace pagoda
