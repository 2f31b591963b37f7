// The kernels of the FP8 W8A8 linear (backend/linear_weight.h gives the
// arithmetic; the CPU backend is the specification):
//
//  - launch_fp8_quantize: activations x [rows, k] (bf16 / f16) to e4m3 codes
//    [rows, k] and their scales [rows, num_groups] f32: per token (one group
//    of k columns; dynamic, or the static input_scale repeated per row) or
//    per token and group of `group` columns (block-wise weights; [num_groups,
//    rows] with scales_by_group, for cuBLASLt's block scale mode). The scale
//    rules of core/fp8_quant.h; codes = e4m3(x / s) with an IEEE division and
//    the saturating round-to-nearest-even conversion (__NV_SATFINITE), so the
//    codes equal the CPU's for the same x.
//  - launch_fp8_gemv: out = the FP8 product from the codes, for 1 ..
//    kFp8GemvMaxRows rows, reading the weight once, by the variant
//    fp8_gemv_variant() picks (PAGODA_FP8_GEMV), where it applies (k % 16
//    == 0, 16-byte aligned codes): by default exactly 1 row on CUDA cores
//    (fp8_gemv_rows.cu: a warp per 2 weight rows over the whole k, 512
//    contiguous bytes per warp load; any block that is a multiple of 16) and
//    2 .. 8 rows on tensor cores (fp8_gemv_tc.cu; block 0 or a multiple of
//    64): the faster of the two at each T on an H100 (kernel_bench
//    --fp8-gemv, docs/cuda-backend.md: T 1, 8B gate_up 40.8 vs 42.2 us; T 2,
//    70B o 26.9 vs 33.6 us). "tc" takes the tensor-core kernel for every row
//    count, "rows" the CUDA-core one wherever it applies (1 ..
//    kFp8GemvRowsMaxRows rows) and the tensor-core one above; where the
//    chosen kernel does not apply the other runs if it may (never rows with
//    "tc"). The tensor-core kernel (fp8_gemv_tc_supports): mma.sync
//    m16n8k32 e4m3 with the activation rows as the mma's 8 columns, its sums
//    promoted to f32 every 64 columns and scaled there (blocks) or at the
//    end (per-row). Given the 16-bit row itself (Fp8LinearParams::x; one
//    row, k <= kFp8GemvFusedMaxK) it quantises that row in shared memory
//    while its first weight loads are in flight, replacing
//    launch_fp8_quantize. What neither kernel may take (fp8_gemv.cu: k % 16
//    != 0; blocks not a multiple of 64 at 3 .. 8 rows, or at any T with
//    "tc") runs one warp per output feature, converting codes to f32 (exact)
//    and dotting them with every row in f32 FMA; the scales are applied per
//    warp partial (per row) or per 16-column lane partial (blocks), then the
//    bias.
//  - launch_fp8_gemm: out = the FP8 product for any number of rows on tensor
//    cores (fp8_gemm.cu; k % 16 == 0, 16-byte aligned codes, block 0 or a
//    multiple of 128, n <= 65535 * 64): tiles of 64 weight rows x 64
//    activation rows x 128 columns staged in shared memory by a cp.async
//    pipeline, mma.sync m16n8k32 e4m3, each 128-column step's sums promoted
//    to f32 and, with block scales, multiplied by s[t, kb] *
//    w_scale[n / B, kb] there (DeepSeek-V3 / vLLM "w8a8 block fp8"
//    numerics, as backend/linear_weight.h defines them); per-row scales and
//    the bias are applied once at the end.
//  - launch_fp8_scale_rows: the epilogue of the unscaled FP8 GEMM (cuBLASLt,
//    f32 out): out[r, j] = acc[r, j] * x_scales[r] * w_scales[j] (+ bias);
//    the fallback of cuBLASLt's own scale modes (cuda_fp8_linear.cpp).
// All are graph-capturable: no allocation, no host synchronization.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

constexpr int kFp8GemvMaxRows = 8;
// The longest activation row the decode kernel quantises itself (shared memory).
constexpr int64_t kFp8GemvFusedMaxK = 32768;
// The most rows of the CUDA-core decode kernel (fp8_gemv_rows.cu).
constexpr int kFp8GemvRowsMaxRows = 2;

// The decode kernels launch_fp8_gemv may run for codes (a 16-bit row to
// quantise, Fp8LinearParams::x, always takes the tensor-core kernel). Where
// the chosen kernel does not apply the other one runs if it may (not rows
// under kTc).
enum class Fp8GemvVariant {
  kAuto,  // rows for exactly 1 row, tc for 2 .. kFp8GemvMaxRows
  kTc,    // fp8_gemv_tc.cu for every row count (PAGODA_FP8_GEMV=tc)
  kRows,  // fp8_gemv_rows.cu for 1 .. kFp8GemvRowsMaxRows rows, else tc (PAGODA_FP8_GEMV=rows)
};

// PAGODA_FP8_GEMV in the environment, read once: tc, rows; unset or anything
// else: kAuto.
Fp8GemvVariant fp8_gemv_variant();

struct Fp8QuantizeParams {
  DType dtype = DType::kBF16;  // x: bf16 or f16
  const void* x = nullptr;     // [rows, k]
  int64_t rows = 0;
  int64_t k = 0;
  int64_t group = 0;                   // 0: one group per row; else the group's columns
  const float* input_scale = nullptr;  // [1] static scale (group 0 only), or null: dynamic
  uint8_t* codes = nullptr;            // [rows, k]
  float* scales = nullptr;             // [rows, num_groups], num_groups = ceil(k / group) or 1
  // group > 0 only: write the scales [num_groups, rows] instead (token index
  // contiguous: cuBLASLt's VEC128_32F layout, cublaslt_linear.h).
  bool scales_by_group = false;
};

cudaError_t launch_fp8_quantize(const Fp8QuantizeParams& p, cudaStream_t stream);

// The operands of an FP8 product: the decode kernels (launch_fp8_gemv, 1 ..
// kFp8GemvMaxRows rows) and launch_fp8_gemm (any number of rows; block 0 or
// a multiple of 128; x / x_dtype / input_scale unread).
struct Fp8LinearParams {
  const uint8_t* x_codes = nullptr;  // [rows, k] (launch_fp8_quantize)
  const float* x_scales = nullptr;   // [rows, num_groups]
  const uint8_t* w = nullptr;        // [n, k] e4m3 codes
  const float* w_scales = nullptr;   // [n] (block 0) or [ceil(n / block), ceil(k / block)]
  int block = 0;                     // 0 or the weight's block, a multiple of 16
  const void* bias = nullptr;        // [n] or null
  DType bias_dtype = DType::kBF16;   // f32, bf16 or f16
  void* out = nullptr;               // [rows, n]
  DType out_dtype = DType::kBF16;    // f32, bf16 or f16
  int rows = 0;                      // >= 1; at most kFp8GemvMaxRows for launch_fp8_gemv
  int64_t n = 0;
  int64_t k = 0;
  // Optional, the tensor-core kernel only (rows == 1, k <= kFp8GemvFusedMaxK):
  // the 16-bit activation row [1, k], which the kernel quantises itself
  // (launch_fp8_quantize's rules and results; x_codes / x_scales unread).
  const void* x = nullptr;
  DType x_dtype = DType::kBF16;        // bf16 or f16
  const float* input_scale = nullptr;  // [1] static scale (block 0 only), or null: dynamic
};

bool fp8_gemv_supports(const Fp8LinearParams& p);
cudaError_t launch_fp8_gemv(const Fp8LinearParams& p, cudaStream_t stream);
// Each decode kernel alone (launch_fp8_gemv picks one of them when supported).
bool fp8_gemv_tc_supports(const Fp8LinearParams& p);
cudaError_t launch_fp8_gemv_tc(const Fp8LinearParams& p, cudaStream_t stream);
bool fp8_gemv_rows_supports(const Fp8LinearParams& p);
cudaError_t launch_fp8_gemv_rows(const Fp8LinearParams& p, cudaStream_t stream);

bool fp8_gemm_supports(const Fp8LinearParams& p);
cudaError_t launch_fp8_gemm(const Fp8LinearParams& p, cudaStream_t stream);

struct Fp8ScaleRowsParams {
  const float* acc = nullptr;       // [rows, n] the unscaled sums
  const float* x_scales = nullptr;  // [rows]
  const float* w_scales = nullptr;  // [n]
  const void* bias = nullptr;       // [n] or null
  DType bias_dtype = DType::kBF16;
  void* out = nullptr;             // [rows, n]
  DType out_dtype = DType::kBF16;  // f32, bf16 or f16
  int64_t rows = 0;
  int64_t n = 0;
};

cudaError_t launch_fp8_scale_rows(const Fp8ScaleRowsParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
