#include "bench/arrivals.h"

#include <cmath>
#include <random>
#include <string>

namespace pagoda::bench {

Result<std::vector<double>> arrival_offsets(int64_t num_requests, double rate, double burstiness,
                                            uint64_t seed) {
  if (num_requests < 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "num_prompts must be >= 0, got " + std::to_string(num_requests));
  if (!(rate > 0.0))
    return make_error(ErrorCode::kInvalidArgument,
                      "request rate must be > 0 (or inf), got " + std::to_string(rate));
  if (!(burstiness > 0.0))
    return make_error(ErrorCode::kInvalidArgument,
                      "burstiness must be > 0, got " + std::to_string(burstiness));
  std::vector<double> t(static_cast<size_t>(num_requests), 0.0);
  if (std::isinf(rate) || num_requests == 0) return t;
  std::mt19937_64 rng(seed);
  double acc = 0.0;
  for (auto& x : t) {
    if (std::isinf(burstiness)) {
      acc += 1.0 / rate;
    } else {
      // Gamma(shape k, scale theta) has mean k * theta = 1 / rate.
      std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
      acc += gap(rng);
    }
    x = acc;
  }
  // Scale so the whole schedule spans exactly num_requests / rate: the raw
  // sum misses it by a few percent, which would move throughput between seeds.
  if (t.back() > 0.0) {
    double scale = static_cast<double>(num_requests) / rate / t.back();
    for (auto& x : t) x *= scale;
  }
  return t;
}

}  // namespace pagoda::bench
