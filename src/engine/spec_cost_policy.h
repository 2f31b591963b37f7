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
// would swamp them). A step verifies when any of its rows verifies drafts.
// A step's time is the wall time of the engine's step() that collected it,
// from its start to the sample's application. With async scheduling the
// step before a verifying one is held (not followed by one planned ahead:
// the drafts need its tokens), so a verification costs that step() too:
// where the device runs a step between launch and collect (CUDA), the held
// step() pays the host work the overlap hid, and the verifying one the
// drafting and launching no step before it hid; where launch computes the
// step (the CPU backend), the held step() computes nothing (its step ran in
// the step() before) and the verifying one computes the verifying step and
// the plain one planned ahead after it. Either way a verification's cost is
// its window -- the held step() and the verifying one -- less that many
// plain steps: r = (window time / plain step time) - window steps. The
// other decode-only steps are plain. Times are kept per batch-size bucket
// (the sequences in the step, rounded up to a power of two: 1, 2, 3-4, 5-8,
// ...), as exponential running averages (kAverageWeight) of plain step
// times and of window times and lengths; the cap of a step is its bucket's:
// a bucket's r compares only steps of about the same batch. Until a bucket
// has measured both (or with a budget of 0), its cap is kMinCap.
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

  // Weight of a new step time in its running average: about the last 8
  // steps of its kind count (the context, and so a step's time, grows
  // slowly; a verifying step comes once per cap steps at most).
  static constexpr double kAverageWeight = 0.125;

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
  // The step started last was collected: num_seqs sequences, whether every
  // one had a single new token or verified drafts (no prefill chunk), and
  // its kind. Records its time since step_started(): a held step's is kept
  // for the verifying step that follows it (dropped if a plain step or a
  // prefill chunk comes first).
  void step_finished(size_t num_seqs, bool decode_only, StepKind kind);
  // Records a decode-only plain step's time (verifying false) or a
  // verification window of num_steps steps (verifying true) directly.
  void record(size_t num_seqs, double seconds, bool verifying, int num_steps = 1);

  // The back-off cap for a step of num_seqs sequences.
  int32_t cap(size_t num_seqs) const;
  // r of num_seqs' bucket (window time / plain time - window steps);
  // nullopt until both plain steps and verifications were measured.
  std::optional<double> extra_cost(size_t num_seqs) const;

 private:
  struct Averages {
    double plain_s = 0.0;       // 0: none yet
    double verify_s = 0.0;      // a verification window's time
    double verify_steps = 0.0;  // a window's steps (1: async off, 2: held + verifying)
  };
  static constexpr size_t kNumBuckets = 17;  // up to 65536 sequences and beyond
  static size_t bucket(size_t num_seqs);

  double budget_;
  NowFn now_;
  Clock::time_point start_{};
  // The held step just before, waiting for the verifying step (0 steps: none).
  double held_s_ = 0.0;
  int num_held_ = 0;
  std::array<Averages, kNumBuckets> buckets_{};
};

}  // namespace pagoda
