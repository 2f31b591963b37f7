// A beam-search request on the engine: the host search (sample/beam_search.h)
// over the scheduler sequences of its live beams. Each step every live beam
// samples one beam row (its top num_candidates_per_beam() tokens); the
// engine hands those rows here, runs step() and makes its branches.
#pragma once

#include <cstddef>
#include <vector>

#include "batch/sampling_batch.h"
#include "sample/beam_search.h"
#include "sched/scheduler.h"

namespace pagoda {

class BeamRequest {
 public:
  // The search starts from one live beam: the request's first sequence.
  BeamRequest(const BeamSearchConfig& config, SeqId first_seq);

  int32_t num_candidates_per_beam() const { return search_.num_candidates_per_beam(); }
  // Takes row r of `so` (the beam row of live sequence `seq`) as that beam's
  // candidates for the next step().
  void add_candidates(SeqId seq, const SampleOutput& so, size_t r);
  // One search step over the candidates taken since the last one: the
  // branches (parent sequence, token) that continue it, best first; empty
  // when the search is done (then results() are final).
  std::vector<Branch> step();
  // The sequences the scheduler made for step()'s branches, in order.
  void set_live(std::vector<SeqId> seqs) { live_ = std::move(seqs); }
  std::vector<BeamHypothesis> results() const { return search_.results(); }

 private:
  BeamSearch search_;
  std::vector<SeqId> live_;                               // live beam i is sequence live_[i]
  std::vector<std::vector<BeamCandidate>> candidates_;  // [live beam] of the coming step
};

}  // namespace pagoda
