// TokenLogprob (engine_api.h) from one row of a SampleOutput.
#pragma once

#include <cstddef>
#include <cstdint>

#include "batch/sampling_batch.h"
#include "engine/engine_api.h"

namespace pagoda {

// `token` with logprob `lp` and rank `rank`, plus the first min(num_top, K)
// of row r's top tokens (K: the width of so's top_* rows).
TokenLogprob make_token_logprob(const SampleOutput& so, size_t r, int32_t token, float lp, int32_t rank,
                                int32_t num_top);

}  // namespace pagoda
