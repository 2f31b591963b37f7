// best_of > n (not beam search): every sample's events are held until the
// request ends; then the n samples with the highest cumulative logprob are
// sent, best first, each as one event.
#pragma once

#include <memory>
#include <vector>

#include "engine/engine_api.h"
#include "engine/request_state.h"

namespace pagoda {

// Whether a request with `params` holds its samples' events.
bool holds_outputs(const SamplingParams& params);

// The events owed for the finished samples `done` (reordered: best first by
// cumulative logprob, stable): for each of the first n that produced
// events, its held events merged into one with index k (its rank).
std::vector<RequestOutput> best_of_winners(std::vector<std::unique_ptr<SampleState>>& done, int n);

}  // namespace pagoda
