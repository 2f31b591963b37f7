// Gathers by an i32 index: rows (embedding lookup, gather_rows) and the
// columns of 16-bit rows (x by a GPTQ act-order permutation of K).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::cuda {

struct GatherRowsParams {
  const void* src = nullptr;     // [num_src_rows, row_bytes] any dtype
  int64_t num_src_rows = 0;
  int64_t row_bytes = 0;
  int64_t first_index = 0;       // the index of src's row 0 (a vocab-parallel shard's first row)
  const int32_t* indices = nullptr;  // [num_rows] device i32
  int64_t num_rows = 0;
  void* out = nullptr;           // [num_rows, row_bytes]
};

// out[r, :] = src[indices[r] - first_index, :]; an index whose row falls
// outside [0, num_src_rows) yields a zero row (another rank's vocab rows, or
// an index that would read out of bounds).
cudaError_t launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream);

struct GatherColumnsParams {
  const uint16_t* src = nullptr;     // [num_rows, num_cols] 16-bit elements (bf16 / f16)
  const int32_t* indices = nullptr;  // [num_cols] device i32, each in [0, num_cols)
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  uint16_t* out = nullptr;  // [num_rows, num_cols]; not src
};

// out[r, i] = src[r, indices[i]].
cudaError_t launch_gather_columns(const GatherColumnsParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
