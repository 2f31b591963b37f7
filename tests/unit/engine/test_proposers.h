// Proposers for the speculative-decoding engine tests: the true
// continuation of recorded outputs (every draft accepted while the output
// follows one), and noise over another proposer's drafts (acceptance in
// between all and nothing). spec/replay_proposer.h and random_proposer.h
// are the library's own.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "spec/proposer.h"

namespace pagoda::test {

// Drafts the continuation of the first recorded token sequence (prompt and
// output) that the sequence's tokens are a proper prefix of; no draft when
// none is. Unlike ReplayProposer, several outputs of one prompt (n > 1,
// other seeds) each replay.
class RecordingsProposer final : public Proposer {
 public:
  void record(std::vector<int32_t> tokens) { recordings_.push_back(std::move(tokens)); }

  Status propose(std::span<const DraftInput> inputs,
                 std::vector<std::vector<int32_t>>& drafts) override;

 private:
  std::vector<std::vector<int32_t>> recordings_;
};

// `inner`'s drafts with every token replaced, with probability `noise`, by
// another id of [0, vocab_size).
class NoisyProposer final : public Proposer {
 public:
  NoisyProposer(std::unique_ptr<Proposer> inner, double noise, uint64_t seed,
                int32_t vocab_size = 512)
      : inner_(std::move(inner)), noise_(noise), rng_(seed), vocab_size_(vocab_size) {}

  Status propose(std::span<const DraftInput> inputs,
                 std::vector<std::vector<int32_t>>& drafts) override;

 private:
  std::unique_ptr<Proposer> inner_;
  double noise_;
  std::mt19937_64 rng_;
  int32_t vocab_size_;
};

}  // namespace pagoda::test
