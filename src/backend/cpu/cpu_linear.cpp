// linear: out = x @ w^T (+ bias), cache-blocked and threaded.
//
// The output is cut into panels of kRowPanel rows x kColPanel columns; one
// panel reads kRowPanel rows of x and kColPanel rows of w (both [*, K]),
// which stay in L2 while the kernel's register tiles sweep them. Panels are
// ordered column-panel-major so each thread streams its own slice of w
// (decode is bound by reading the weights once).
//
// A block-dtype w (core/dtype.h) is dequantized one column panel at a time
// (kColPanel rows of w, by core/block_dequant.h, in logical column order)
// into an f32 buffer and fed to
// the same gemm over the same panels, so the result is bit-identical to
// dequantizing the whole weight first and running the f32 linear.
#include <algorithm>
#include <cassert>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/block_dequant.h"
#include "core/thread_pool.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kRowPanel = 64;
constexpr int64_t kColPanel = 64;

// out = x @ w^T (+ bias) for a block-dtype w [num_cols, k]: each work item
// takes one column panel, dequantizes its rows of w, then sweeps every row
// panel of x with it.
void linear_blocks(const Tensor& x, const Tensor& w, const float* bp, Tensor& out) {
  const int64_t num_rows = x.dim(0);
  const int64_t k = x.dim(1);
  const int64_t num_cols = w.dim(0);
  const float* xp = x.ptr<float>();
  float* op = out.ptr<float>();
  const CpuKernels& kern = kernels();
  const int64_t num_col_panels = (num_cols + kColPanel - 1) / kColPanel;
  parallel_for(num_col_panels, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> panel(static_cast<size_t>(kColPanel * k));
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t c0 = p * kColPanel;
      const int64_t nc = std::min(kColPanel, num_cols - c0);
      dequantize_weight_rows(w.dtype, w.data, num_cols, k, c0, nc, panel.data());
      for (int64_t r0 = 0; r0 < num_rows; r0 += kRowPanel) {
        const int64_t nr = std::min(kRowPanel, num_rows - r0);
        kern.gemm(xp + r0 * k, nr, panel.data(), nc, k, bp != nullptr ? bp + c0 : nullptr,
                  op + r0 * num_cols + c0, num_cols);
      }
    }
  });
}

}  // namespace

void linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out) {
  if (w.is_fp8()) return linear_fp8(x, w, bias, out);
  assert(x.dtype == DType::kF32 && out.dtype == DType::kF32);
  assert(w.dtype == DType::kF32 || is_block_dtype(w.dtype));
  const int64_t num_rows = x.dim(0);
  const int64_t k = x.dim(1);
  const int64_t num_cols = w.dim(0);
  assert(w.dim(1) == k && out.dim(0) == num_rows && out.dim(1) == num_cols);
  assert(bias.empty() || (bias.dtype == DType::kF32 && bias.numel() == num_cols));
  const float* bp = bias.empty() ? nullptr : bias.ptr<float>();
  if (is_block_dtype(w.dtype)) {
    assert(k % dtype_block_elems(w.dtype) == 0);
    linear_blocks(x, w, bp, out);
    return;
  }
  const float* xp = x.ptr<float>();
  const float* wp = w.ptr<float>();
  float* op = out.ptr<float>();
  const CpuKernels& kern = kernels();

  const int64_t num_row_panels = (num_rows + kRowPanel - 1) / kRowPanel;
  const int64_t num_col_panels = (num_cols + kColPanel - 1) / kColPanel;
  parallel_for(num_row_panels * num_col_panels, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t c0 = (p / num_row_panels) * kColPanel;
      const int64_t r0 = (p % num_row_panels) * kRowPanel;
      const int64_t nc = std::min(kColPanel, num_cols - c0);
      const int64_t nr = std::min(kRowPanel, num_rows - r0);
      kern.gemm(xp + r0 * k, nr, wp + c0 * k, nc, k, bp != nullptr ? bp + c0 : nullptr,
                op + r0 * num_cols + c0, num_cols);
    }
  });
}

}  // namespace pagoda::cpu
