// Speculative decoding's back-off: after a step in which none of a sample's
// drafts was accepted (or the proposer had none), the sample waits before it
// is drafted again; the wait doubles with each miss up to kMaxBackoff steps
// and an accepted draft resets it. Rejected drafts cost a wider step (k + 1
// rows per verifying sequence, replayed from a verification graph when it
// fits one, model/verify_graphs.h); asking for drafts at all ends async
// scheduling's overlap for that step; the wait keeps both small while
// nothing is accepted.
#pragma once

#include <algorithm>
#include <cstdint>

namespace pagoda {

struct SpecBackoff {
  static constexpr int32_t kMaxBackoff = 8;

  // The wait after a step drafted for: 0 after an accepted draft, else 1, 2,
  // 4, ... kMaxBackoff.
  static int32_t next_wait(int32_t wait, bool accepted) {
    if (accepted) return 0;
    return std::min(wait > 0 ? 2 * wait : 1, kMaxBackoff);
  }

  // The first engine step at which a sample drafted (or asked for drafts) in
  // `step` is drafted again after waiting `wait` steps: step + 1 + wait.
  // After rejected drafts (`rejected`) at the cap, that is rounded down to a
  // multiple of kMaxBackoff (still after `step` + 1), so that the samples
  // whose drafts keep being rejected -- typically every sample of a batch
  // whose proposer misses -- verify in the same steps, one in kMaxBackoff,
  // and the steps between stay plain decode steps for the whole batch
  // (graph-replayed, overlapped); rounding down never tries later than the
  // plain wait would. A proposer that had no draft cost no verification, so
  // that wait is not rounded.
  static int64_t next_step(int64_t step, int32_t wait, bool rejected) {
    const int64_t earliest = step + 1 + wait;
    if (!rejected || wait < kMaxBackoff) return earliest;
    return earliest / kMaxBackoff * kMaxBackoff;
  }
};

}  // namespace pagoda
