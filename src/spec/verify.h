// Verification of drafts: which of them a step keeps.
#pragma once

#include <cstdint>
#include <span>

namespace pagoda {

// The number of drafts a verification keeps: the longest prefix of `drafts`
// equal to the target's samples, samples[j] being the target's draw after
// the tokens before the drafts and drafts 0..j-1 (samples.size() ==
// drafts.size() + 1). The step then outputs drafts 0..kept-1 and
// samples[kept]. Each of those tokens is exactly the draw the target makes
// at its position without speculation (the sampler's draw depends only on
// the request's seed and the token's index, batch/sampling_batch.h), so
// greedy and seeded outputs are identical with and without speculation and
// the output distribution is the target's. For a proposer whose drafts are
// point masses (n-gram, suffix, greedy draft models) this is Leviathan et
// al.'s rejection rule -- accept draft d with probability p(d), else draw
// from p without d -- with the target's own draw as the coupled randomness.
inline int32_t num_accepted(std::span<const int32_t> samples, std::span<const int32_t> drafts) {
  int32_t kept = 0;
  while (static_cast<size_t>(kept) < drafts.size() && static_cast<size_t>(kept) < samples.size() &&
         samples[static_cast<size_t>(kept)] == drafts[static_cast<size_t>(kept)]) {
    ++kept;
  }
  return kept;
}

}  // namespace pagoda
