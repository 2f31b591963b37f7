// Which rows of an all_reduce_add_rms_norm take the fused one-shot kernel
// (backend/cuda/oneshot_all_reduce.h: launch_oneshot_all_reduce_norm) and
// which the unfused pair (the one-shot all-reduce, then add_rms_norm). Both
// give the same bits; only the time differs, so the choice is a threshold on
// the rows, the same on every rank of a group.
#pragma once

#include <cstdint>

#include "core/result.h"

namespace pagoda {

// Rows up to which the fused kernel runs by default. comm_bench on 2x H100
// (bf16 [rows, 4096], graph replay, session 24): the fused kernel wins at 1
// row (5.1 us vs 5.4 unfused) but loses from 32 rows on (64 rows: 9.5 vs
// 8.3 us; 512 rows: 56.3 vs 32.9): each of its at most 32 blocks normalises
// whole rows after its own wait, while the unfused pair spreads the sum over
// every SM. 16 is a guess inside the gap; comm_bench's norm table (rows 1 to
// 64) measures where the crossover lies.
constexpr int64_t kDefaultFusedNormMaxRows = 16;
// The environment variable that overrides it: a row count from 0 (the
// fused kernel never runs) to kMaxFusedNormRows (it runs wherever the message
// fits the one-shot path).
constexpr const char* kFusedNormMaxRowsEnv = "PAGODA_FUSED_NORM_MAX_ROWS";
constexpr int64_t kMaxFusedNormRows = int64_t{1} << 30;

// The threshold that `option` resolves to: option itself when >= 0, else
// $PAGODA_FUSED_NORM_MAX_ROWS, else kDefaultFusedNormMaxRows. An error names
// the variable when its value is not a whole number in [0, kMaxFusedNormRows],
// or the option when it is above kMaxFusedNormRows.
Result<int64_t> resolve_fused_norm_max_rows(int64_t option);

// Whether a [rows, hidden] message takes the fused kernel under `max_rows`
// (the caller has already checked that it fits the one-shot path).
inline bool takes_fused_norm(int64_t rows, int64_t max_rows) {
  return rows <= max_rows;
}

}  // namespace pagoda
