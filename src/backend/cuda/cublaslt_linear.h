// out = x @ w^T (+ bias) through cuBLASLt: 16-bit inputs, f32 compute, 16-bit
// or f32 output, the bias fused as an epilogue when its dtype equals the
// output's. Matmul descriptors and layouts are cached per (shape, dtypes,
// pointer alignments); the workspace is allocated once, so run() never
// allocates device memory and is graph-capturable.
//
// Algorithm choice: cublasLtMatmulAlgoGetHeuristic costs milliseconds, and
// mixed prefill/decode steps bring a new row count almost every step. So the
// heuristic runs once per row bucket (four per octave, at the bucket's top
// row count) and a new row count in the bucket reuses that algorithm after
// cublasLtMatmulAlgoCheck accepts it for the exact shape (else it gets its own
// heuristic call).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "core/dtype.h"
#include "core/result.h"

namespace pagoda::cuda {

struct LinearArgs {
  const void* x = nullptr;    // [rows, k]
  const void* w = nullptr;    // [n, k]
  const void* bias = nullptr; // [n] or null
  void* out = nullptr;        // [rows, n], rows ldo elements apart
  int64_t ldo = 0;            // out's row stride in elements (>= n); 0: n
  int64_t rows = 0;
  int64_t n = 0;
  int64_t k = 0;
  // x and w: bf16 or f16; or e4m3 (kF8E4M3: unscaled, out f32, no bias, k and
  // n multiples of 16, 16-byte aligned: cuBLASLt's FP8 GEMM, TN layout)
  DType in_dtype = DType::kBF16;
  DType bias_dtype = DType::kBF16; // must equal out_dtype (callers add other biases apart)
  DType out_dtype = DType::kBF16;  // in_dtype or f32
};

class CublasLtLinear {
 public:
  // Creates the cuBLASLt handle and a device workspace of `workspace_bytes`.
  static Result<std::unique_ptr<CublasLtLinear>> create(size_t workspace_bytes);
  ~CublasLtLinear();
  CublasLtLinear(const CublasLtLinear&) = delete;
  CublasLtLinear& operator=(const CublasLtLinear&) = delete;

  // Enqueues the product on `stream`. rows == 0 is a no-op.
  Status run(const LinearArgs& a, cudaStream_t stream);

  // The row count whose heuristic choice serves `rows`: rows itself up to 8,
  // then rounded up to four buckets per power of two (9..10 -> 10, 33..40 -> 40).
  static int64_t row_bucket(int64_t rows);

 private:
  // (n, rows, k, in dtype, out dtype, has bias, alignment log2 of x, w, out,
  // bias, out's row stride)
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool, int, int, int, int, int64_t>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr;  // w as column-major [k, n], transposed
    cublasLtMatrixLayout_t b = nullptr;  // x as column-major [k, rows]
    cublasLtMatrixLayout_t d = nullptr;  // out as column-major [n, rows]
    cublasLtMatmulAlgo_t algo{};
  };

  CublasLtLinear() = default;
  Result<Plan*> find_plan(const LinearArgs& a);
  // Descriptor and layouts for the exact shape of `a`.
  Status build_layouts(const LinearArgs& a, Plan& plan);
  // The heuristic's first algorithm for `plan`'s descriptor and layouts.
  Status run_heuristic(const LinearArgs& a, const Key& key, const Plan& plan,
                       cublasLtMatmulAlgo_t* algo);
  bool algo_fits(const Plan& plan, const cublasLtMatmulAlgo_t& algo);
  static void destroy(Plan& plan);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;                  // exact shapes
  std::map<Key, cublasLtMatmulAlgo_t> algos_;  // rows -> row_bucket(rows)
};

}  // namespace pagoda::cuda
