// linear with an FP8 W8A8 weight (backend/linear_weight.h): the reference
// implementation of its arithmetic; also from activations quantised by their
// producer (linear_fp8_rows, fp8_quantize_rows: backend.h Fp8Rows).
//
// The activations are quantised once per call (core/fp8_quant.h) into the
// f32 values of their e4m3 codes, group by group (one group of K columns per
// row when block == 0). Each work item takes one column panel of w, turns its
// codes into their f32 values (exact) and runs the f32 gemm per group over
// every row panel; the group sums are then scaled and added in group order.
#include <algorithm>
#include <cassert>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/fp8_quant.h"
#include "core/thread_pool.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kRowPanel = 64;
constexpr int64_t kColPanel = 64;

// x [T, K] quantised in groups of `width` columns (the last may be narrower):
// group g of row t at values[T * g * width + t * gw(g) + j], its scale at
// scales[t * num_groups + g].
struct QuantizedActivations {
  int64_t width = 0;
  int64_t num_groups = 0;
  std::vector<float> values;
  std::vector<float> scales;

  int64_t group_width(int64_t g, int64_t k) const { return std::min(width, k - g * width); }
};

QuantizedActivations quantize_activations(const Tensor& x, const LinearWeight& w) {
  const int64_t t = x.dim(0), k = x.dim(1);
  QuantizedActivations q;
  q.width = w.block > 0 ? w.block : k;
  q.num_groups = (k + q.width - 1) / q.width;
  q.values.resize(static_cast<size_t>(t * k));
  q.scales.resize(static_cast<size_t>(t * q.num_groups));
  const float* table = e4m3_value_table();
  const float* xp = x.ptr<float>();
  parallel_for(t, 16, [&](int64_t lo, int64_t hi) {
    std::vector<uint8_t> codes(static_cast<size_t>(q.width));
    for (int64_t r = lo; r < hi; ++r) {
      for (int64_t g = 0; g < q.num_groups; ++g) {
        const int64_t gw = q.group_width(g, k);
        const float* src = xp + r * k + g * q.width;
        const float amax = fp8_amax(src, gw);
        float s = 0.0f;
        if (w.block > 0) {
          s = fp8_group_scale(amax);
        } else {
          s = w.input_scale.empty() ? fp8_token_scale(amax) : w.input_scale.ptr<float>()[0];
        }
        q.scales[static_cast<size_t>(r * q.num_groups + g)] = s;
        fp8_quantize(src, gw, s, codes.data());
        float* dst = q.values.data() + t * g * q.width + r * gw;
        for (int64_t j = 0; j < gw; ++j) dst[j] = table[codes[static_cast<size_t>(j)]];
      }
    }
  });
  return q;
}

// The values of producer-quantised rows: one group of K columns per row.
QuantizedActivations from_rows(const Fp8Rows& x) {
  const int64_t t = x.codes.dim(0), k = x.codes.dim(1);
  QuantizedActivations q;
  q.width = k;
  q.num_groups = 1;
  q.values.resize(static_cast<size_t>(t * k));
  q.scales.assign(x.scales.ptr<float>(), x.scales.ptr<float>() + t);
  const float* table = e4m3_value_table();
  const auto* codes = static_cast<const uint8_t*>(x.codes.data);
  for (int64_t i = 0; i < t * k; ++i) q.values[static_cast<size_t>(i)] = table[codes[i]];
  return q;
}

// out = the FP8 product of the quantised activations q [T, K] and w.
void fp8_product(const QuantizedActivations& q, int64_t num_rows, int64_t k, const LinearWeight& w,
                 const Tensor& bias, Tensor& out) {
  const int64_t num_cols = w.dim(0);
  const float* bp = bias.empty() ? nullptr : bias.ptr<float>();
  const float* ws = w.weight_scale.ptr<float>();
  const int64_t ws_cols = w.block > 0 ? (k + w.block - 1) / w.block : 0;
  const auto* wq = static_cast<const uint8_t*>(w.data);
  const float* table = e4m3_value_table();
  float* op = out.ptr<float>();
  const CpuKernels& kern = kernels();
  const int64_t num_col_panels = (num_cols + kColPanel - 1) / kColPanel;
  parallel_for(num_col_panels, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> panel(static_cast<size_t>(kColPanel * q.width));
    std::vector<float> part(static_cast<size_t>(kRowPanel * kColPanel));
    std::vector<float> acc(static_cast<size_t>(num_rows * kColPanel));
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t c0 = p * kColPanel;
      const int64_t nc = std::min(kColPanel, num_cols - c0);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t g = 0; g < q.num_groups; ++g) {
        const int64_t gw = q.group_width(g, k);
        for (int64_t c = 0; c < nc; ++c)
          for (int64_t j = 0; j < gw; ++j)
            panel[static_cast<size_t>(c * gw + j)] = table[wq[(c0 + c) * k + g * q.width + j]];
        const float* xg = q.values.data() + num_rows * g * q.width;
        for (int64_t r0 = 0; r0 < num_rows; r0 += kRowPanel) {
          const int64_t nr = std::min(kRowPanel, num_rows - r0);
          kern.gemm(xg + r0 * gw, nr, panel.data(), nc, gw, nullptr, part.data(), nc);
          for (int64_t r = 0; r < nr; ++r) {
            const float s = q.scales[static_cast<size_t>((r0 + r) * q.num_groups + g)];
            for (int64_t c = 0; c < nc; ++c) {
              const float wsc = w.block > 0 ? ws[((c0 + c) / w.block) * ws_cols + g] : ws[c0 + c];
              acc[static_cast<size_t>((r0 + r) * nc + c)] +=
                  part[static_cast<size_t>(r * nc + c)] * s * wsc;
            }
          }
        }
      }
      for (int64_t r = 0; r < num_rows; ++r)
        for (int64_t c = 0; c < nc; ++c)
          op[r * num_cols + c0 + c] =
              acc[static_cast<size_t>(r * nc + c)] + (bp != nullptr ? bp[c0 + c] : 0.0f);
    }
  });
}

}  // namespace

void linear_fp8(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out) {
  assert(x.dtype == DType::kF32 && out.dtype == DType::kF32 && w.is_fp8());
  const int64_t num_rows = x.dim(0), k = x.dim(1);
  assert(w.dim(1) == k && out.dim(0) == num_rows && out.dim(1) == w.dim(0));
  assert(w.weight_scale.dtype == DType::kF32);
  assert(w.block == 0 || w.input_scale.empty());
  fp8_product(quantize_activations(x, w), num_rows, k, w, bias, out);
}

void fp8_quantize_rows(const Tensor& a, Fp8Rows& q) {
  assert(a.dtype == DType::kF32 && q.codes.dtype == DType::kF8E4M3 && q.scales.dtype == DType::kF32);
  const int64_t t = a.dim(0), k = a.dim(1);
  assert(q.codes.dim(0) == t && q.codes.dim(1) == k && q.scales.numel() == t);
  const float* ap = a.ptr<float>();
  auto* codes = static_cast<uint8_t*>(q.codes.data);
  float* scales = q.scales.ptr<float>();
  parallel_for(t, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float s = fp8_token_scale(fp8_amax(ap + r * k, k));
      scales[r] = s;
      fp8_quantize(ap + r * k, k, s, codes + r * k);
    }
  });
}

void linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& bias, Tensor& out) {
  assert(out.dtype == DType::kF32 && w.is_fp8() && w.block == 0 && w.input_scale.empty());
  const int64_t num_rows = x.codes.dim(0), k = x.codes.dim(1);
  assert(w.dim(1) == k && out.dim(0) == num_rows && out.dim(1) == w.dim(0));
  fp8_product(from_rows(x), num_rows, k, w, bias, out);
}

}  // namespace pagoda::cpu
