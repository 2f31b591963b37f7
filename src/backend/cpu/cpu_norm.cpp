// RMSNorm family: rms_norm, add_rms_norm, qk_norm (per-head, Qwen3).
// Like Hugging Face: inv = 1 / sqrt(mean(x^2) + eps) in f32, then
// out = (x * inv) * w.
#include <cassert>
#include <cmath>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/thread_pool.h"

namespace pagoda::cpu {
namespace {

int64_t min_rows(int64_t width) {
  return 1 + 16384 / (width > 0 ? width : 1);
}

// out[i] = x[i] * inv_rms(x) * w[i] for one row of n elements; out may be x.
void norm_row(const float* x, const float* w, int64_t n, float eps, float* out) {
  const float mean = kernels().sum_squares(x, n) / static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * inv) * w[i];
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  assert(x.dtype == DType::kF32 && w.dtype == DType::kF32 && out.dtype == DType::kF32);
  const int64_t num_rows = x.dim(0);
  const int64_t width = x.dim(1);
  assert(w.numel() == width && out.numel() == x.numel());
  const float* in = x.ptr<float>();
  const float* wp = w.ptr<float>();
  float* o = out.ptr<float>();
  parallel_for(num_rows, min_rows(width), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) norm_row(in + t * width, wp, width, eps, o + t * width);
  });
}

void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  assert(residual.dtype == DType::kF32 && x.dtype == DType::kF32 && out.dtype == DType::kF32);
  const int64_t num_rows = residual.dim(0);
  const int64_t width = residual.dim(1);
  assert(x.numel() == residual.numel() && out.numel() == residual.numel() && w.numel() == width);
  float* res = residual.ptr<float>();
  const float* in = x.ptr<float>();
  const float* wp = w.ptr<float>();
  float* o = out.ptr<float>();
  parallel_for(num_rows, min_rows(width), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      float* r = res + t * width;
      for (int64_t i = 0; i < width; ++i) r[i] += in[t * width + i];
      norm_row(r, wp, width, eps, o + t * width);
    }
  });
}

void qk_norm(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w, const Tensor& k_w,
             float eps) {
  assert(qkv.dtype == DType::kF32 && qkv.dim(1) == layout.row_width());
  const int64_t d = layout.head_dim;
  assert(q_w.numel() == d && k_w.numel() == d);
  const int64_t num_q = layout.num_q_heads;
  const int64_t num_normed = num_q + layout.num_kv_heads;  // q heads, then k heads
  const int64_t width = layout.row_width();
  float* base = qkv.ptr<float>();
  const float* qw = q_w.ptr<float>();
  const float* kw = k_w.ptr<float>();
  parallel_for(qkv.dim(0), min_rows(num_normed * d), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      for (int64_t h = 0; h < num_normed; ++h) {
        float* head = base + t * width + h * d;
        norm_row(head, h < num_q ? qw : kw, d, eps, head);
      }
    }
  });
}

}  // namespace pagoda::cpu
