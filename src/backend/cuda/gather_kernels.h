// Row gathers by an i32 index: embedding lookup and gather_rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::cuda {

struct GatherRowsParams {
  const void* src = nullptr;     // [num_src_rows, row_bytes] any dtype
  int64_t num_src_rows = 0;
  int64_t row_bytes = 0;
  const int32_t* indices = nullptr;  // [num_rows] device i32
  int64_t num_rows = 0;
  void* out = nullptr;           // [num_rows, row_bytes]
};

// out[r, :] = src[indices[r], :]; an index outside [0, num_src_rows) yields a
// zero row instead of reading out of bounds.
cudaError_t launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
