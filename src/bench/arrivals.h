// Request arrival times of an open-loop benchmark, as `vllm bench serve`
// draws them: inter-arrival gaps from a gamma distribution with
// shape = burstiness and mean 1 / rate (burstiness 1 is a Poisson process;
// < 1 burstier, > 1 more regular), accumulated, then scaled so that the last
// arrival lands exactly at num_requests / rate.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"

namespace pagoda::bench {

// Arrival offsets in seconds from the benchmark start, one per request,
// non-decreasing. rate = +inf: all zero. burstiness = +inf: evenly spaced.
// Errors: rate or burstiness not > 0, num_requests < 0.
Result<std::vector<double>> arrival_offsets(int64_t num_requests, double rate, double burstiness,
                                            uint64_t seed);

}  // namespace pagoda::bench
