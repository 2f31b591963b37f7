// RandomProposer: drafts that all but never match (benchmarks and tests only).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/proposer.h"

namespace pagoda {

// max_draft uniformly random
// token ids of [0, vocab_size) per sequence, which a trained model all but
// never accepts: the cost of speculation when nothing is accepted.
class RandomProposer final : public Proposer {
 public:
  RandomProposer(int32_t vocab_size, uint64_t seed) : vocab_size_(vocab_size), state_(seed) {}

  Status propose(std::span<const DraftInput> inputs,
                 std::vector<std::vector<int32_t>>& drafts) override;

 private:
  int32_t vocab_size_;
  uint64_t state_;
};

}  // namespace pagoda
