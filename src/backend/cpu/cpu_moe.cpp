// Mixture-of-experts ops: routing (softmax, top-k, optional renormalisation),
// the routed experts' SwiGLU MLPs computed plainly one token and one expert
// at a time, and the sigmoid-gated add of a shared expert.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/thread_pool.h"

namespace pagoda::cpu {

void moe_route(const Tensor& logits, bool renormalize, Tensor& ids, Tensor& weights) {
  assert(logits.dtype == DType::kF32 && ids.dtype == DType::kI32 && weights.dtype == DType::kF32);
  const int64_t num_tokens = logits.dim(0), num_experts = logits.dim(1), k = ids.dim(1);
  assert(ids.dim(0) == num_tokens && weights.dim(0) == num_tokens && weights.dim(1) == k);
  assert(k >= 1 && k <= num_experts);
  parallel_for(num_tokens, 64, [&](int64_t lo, int64_t hi) {
    std::vector<float> p(static_cast<size_t>(num_experts));
    std::vector<int32_t> order(static_cast<size_t>(num_experts));
    for (int64_t t = lo; t < hi; ++t) {
      const float* l = logits.ptr<float>() + t * num_experts;
      const float max = *std::max_element(l, l + num_experts);
      float sum = 0.0f;
      for (int64_t e = 0; e < num_experts; ++e) sum += p[e] = std::exp(l[e] - max);
      for (int64_t e = 0; e < num_experts; ++e) {
        p[e] /= sum;
        order[e] = static_cast<int32_t>(e);
      }
      // Decreasing probability; equal probabilities keep increasing expert id.
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return p[a] > p[b]; });
      int32_t* out_ids = ids.ptr<int32_t>() + t * k;
      float* out_w = weights.ptr<float>() + t * k;
      float top_sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        out_ids[j] = order[j];
        top_sum += out_w[j] = p[order[j]];
      }
      if (renormalize)
        for (int64_t j = 0; j < k; ++j) out_w[j] /= top_sum;
    }
  });
}

void moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                 const Tensor& weights, Tensor& out) {
  assert(x.dtype == DType::kF32 && gate_up.dtype == DType::kF32 && down.dtype == DType::kF32 &&
         out.dtype == DType::kF32 && ids.dtype == DType::kI32 && weights.dtype == DType::kF32);
  const int64_t num_tokens = x.dim(0), hidden = x.dim(1), k = ids.dim(1);
  const int64_t num_experts = gate_up.dim(0), inter = down.dim(2);
  assert(gate_up.dim(1) == 2 * inter && gate_up.dim(2) == hidden && down.dim(0) == num_experts &&
         down.dim(1) == hidden && out.dim(0) == num_tokens && out.dim(1) == hidden);
  const CpuKernels& kern = kernels();
  parallel_for(num_tokens, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> gu(static_cast<size_t>(2 * inter)), act(static_cast<size_t>(inter)),
        y(static_cast<size_t>(hidden));
    for (int64_t t = lo; t < hi; ++t) {
      const float* xt = x.ptr<float>() + t * hidden;
      float* o = out.ptr<float>() + t * hidden;
      std::fill(o, o + hidden, 0.0f);
      for (int64_t j = 0; j < k; ++j) {  // slot order: a fixed summation order per token
        const int64_t e = ids.ptr<int32_t>()[t * k + j];
        assert(e >= 0 && e < num_experts);
        kern.gemm(xt, 1, gate_up.ptr<float>() + e * 2 * inter * hidden, 2 * inter, hidden, nullptr,
                  gu.data(), 2 * inter);
        for (int64_t i = 0; i < inter; ++i) {
          const float g = gu[i];
          act[i] = g / (1.0f + std::exp(-g)) * gu[inter + i];
        }
        kern.gemm(act.data(), 1, down.ptr<float>() + e * hidden * inter, hidden, inter, nullptr,
                  y.data(), hidden);
        kern.axpy(weights.ptr<float>()[t * k + j], y.data(), o, hidden);
      }
    }
  });
  (void)num_experts;
}

void add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x, const Tensor& gate_w) {
  assert(out.dtype == DType::kF32 && y.dtype == DType::kF32 && x.dtype == DType::kF32 &&
         gate_w.dtype == DType::kF32);
  const int64_t num_tokens = out.dim(0), hidden = out.dim(1);
  assert(y.numel() == out.numel() && x.numel() == out.numel() && gate_w.numel() == hidden);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float g = kernels().dot(x.ptr<float>() + t * hidden, gate_w.ptr<float>(), hidden);
    const float s = 1.0f / (1.0f + std::exp(-g));
    kernels().axpy(s, y.ptr<float>() + t * hidden, out.ptr<float>() + t * hidden, hidden);
  }
}

}  // namespace pagoda::cpu
