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
// heuristic call). A shape cuBLASLt refused (no algorithm, or a descriptor it
// rejects) is remembered, so asking again fails at once without a heuristic
// call.
//
// FP8 scale modes (cuBLASLt 12.9+, Hopper; Fp8Scales): cuBLASLt's "A" is w
// (column-major [k, n], op T) and "B" is x (column-major [k, rows]), so w's
// scales go to A_SCALE_POINTER and x's to B_SCALE_POINTER. kOuterVec
// (OUTER_VEC_32F both): out[r, j] = sum * w_scales[j] * x_scales[r].
// kBlock128 (BLK128x128_32F on w, VEC128_32F on x): each 128-column step's
// sum is scaled by w_scales[j / 128, kb] * x_scales[kb, r]; cuBLASLt reads the
// block grid k-block-major with its row stride padded to a multiple of 4
// (element [nb, kb] at nb * round_up(ceil(k / 128), 4) + kb) and the
// activation grid token-major (element [kb, r] at kb * rows + r).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "core/dtype.h"
#include "core/result.h"

namespace pagoda::cuda {

enum class Fp8Scales { kNone, kOuterVec, kBlock128 };

struct LinearArgs {
  const void* x = nullptr;    // [rows, k]
  const void* w = nullptr;    // [n, k]
  const void* bias = nullptr; // [n] or null
  void* out = nullptr;        // [rows, n], rows ldo elements apart
  int64_t ldo = 0;            // out's row stride in elements (>= n); 0: n
  int64_t rows = 0;
  int64_t n = 0;
  int64_t k = 0;
  // x and w: bf16 or f16; or e4m3 (kF8E4M3: k and n multiples of 16, 16-byte
  // aligned: cuBLASLt's FP8 GEMM, TN layout; unscaled with out f32 and no
  // bias unless fp8_scales says otherwise)
  DType in_dtype = DType::kBF16;
  DType bias_dtype = DType::kBF16; // must equal out_dtype (callers add other biases apart)
  DType out_dtype = DType::kBF16;  // in_dtype or f32
  // e4m3 only: cuBLASLt applies the scales itself and writes out_dtype (bf16,
  // f16 or f32) with the bias epilogue (bias_dtype == out_dtype); layouts in
  // the header comment. kNone: the unscaled product above.
  Fp8Scales fp8_scales = Fp8Scales::kNone;
  const float* w_scales = nullptr;  // kOuterVec: [n]; kBlock128: [ceil(n / 128), round_up(ceil(k / 128), 4)]
  const float* x_scales = nullptr;  // kOuterVec: [rows]; kBlock128: [ceil(k / 128), rows]
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
  // bias, out's row stride, FP8 scale mode)
  using Key =
      std::tuple<int64_t, int64_t, int64_t, int, int, bool, int, int, int, int, int64_t, int>;
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
  std::map<Key, std::string> refused_;         // exact shapes cuBLASLt refused: the error
  // Sets the scale pointers of a (when it has FP8 scales) on desc.
  static cublasStatus_t set_scale_pointers(cublasLtMatmulDesc_t desc, const LinearArgs& a);
};

}  // namespace pagoda::cuda
