// Speculative decoding's back-off: after a step in which none of a sample's
// drafts was accepted (or the proposer had none), the sample waits before it
// is drafted again; the wait doubles with each miss up to a cap and an
// accepted draft resets it. Rejected drafts cost a wider step (k + 1 rows per
// verifying sequence, replayed from a verification graph when it fits one,
// model/verify_graphs.h); asking for drafts at all ends async scheduling's
// overlap for that step; the wait keeps both small while nothing is
// accepted. The cap is a power of two in [kMinCap, kMaxCap]: kMinCap, or what
// the engine's measured cost of verification asks for
// (engine/spec_cost_policy.h).
#pragma once

#include <algorithm>
#include <cstdint>

namespace pagoda {

struct SpecBackoff {
  // The cap's range. Powers of two, so that a multiple of a larger cap is a
  // multiple of every smaller one: samples aligned under one cap stay
  // aligned when it changes (next_step).
  static constexpr int32_t kMinCap = 8;
  static constexpr int32_t kMaxCap = 64;

  // The wait after a step drafted for: 0 after an accepted draft, else 1, 2,
  // 4, ... `cap` (a wait above a cap that shrank drops to it).
  static int32_t next_wait(int32_t wait, bool accepted, int32_t cap) {
    if (accepted) return 0;
    return std::min(wait > 0 ? 2 * wait : 1, cap);
  }

  // The first engine step at which a sample drafted (or asked for drafts) in
  // `step` is drafted again after waiting `wait` steps: step + 1 + wait.
  // After rejected drafts (`rejected`) that is rounded down to a multiple of
  // the wait (a power of two; still after `step` + 1), so that the samples
  // whose drafts keep being rejected -- typically every sample of a batch
  // whose proposer misses -- verify in the same steps already while their
  // waits ramp up (a wait of 16 lands on multiples of 16, which are
  // multiples of 8, ...), and at the cap one in `cap`; the steps between
  // stay plain decode steps for the whole batch (graph-replayed,
  // overlapped); rounding down never tries later than the plain wait would.
  // A proposer that had no draft cost no verification, so that wait is not
  // rounded. `cap`: a power of two (unused: the wait is already within it).
  static int64_t next_step(int64_t step, int32_t wait, bool rejected, int32_t /*cap*/) {
    const int64_t earliest = step + 1 + wait;
    if (!rejected || wait < 2) return earliest;
    return earliest / wait * wait;
  }
};

}  // namespace pagoda
