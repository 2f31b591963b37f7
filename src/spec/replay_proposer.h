// ReplayProposer (benchmarks and tests only): drafts a recorded
// continuation of each prompt -- typically the target's own greedy output
// from a first run -- so that every draft is accepted while the output
// follows the recording. It measures verification at full acceptance
// without any proposer's cost or misses. A sequence whose prompt has no
// recording, or whose output left it, gets no draft -- unless the proposer
// follows positions (follow_positions()): then a sequence with n output
// tokens is drafted the recording's tokens n, n + 1, ... whatever its output
// holds (with an acceptance rule that keeps every draft, the forced replay
// of `pagoda bench latency --speculative-replay-forced`).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "spec/proposer.h"

namespace pagoda {

class ReplayProposer final : public Proposer {
 public:
  // Records `continuation` for `prompt` (a later record of the same prompt
  // replaces it).
  void record(std::span<const int32_t> prompt, std::span<const int32_t> continuation);
  // Drafts by position in the recording, not only while the output equals it.
  void follow_positions() { follow_positions_ = true; }

  Status propose(std::span<const DraftInput> inputs,
                 std::vector<std::vector<int32_t>>& drafts) override;

 private:
  std::map<std::vector<int32_t>, std::vector<int32_t>> recordings_;
  bool follow_positions_ = false;
};

}  // namespace pagoda
