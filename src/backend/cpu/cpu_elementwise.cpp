// Row-wise ops without reductions: embedding, silu_mul, gelu_tanh_mul,
// scale, softcap, gather_rows, rope.
#include <cassert>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "core/thread_pool.h"

namespace pagoda::cpu {
namespace {

// Rows per parallel chunk so that a chunk moves at least ~64 KiB.
int64_t min_rows(int64_t row_elems) {
  return 1 + 16384 / (row_elems > 0 ? row_elems : 1);
}

// out[r, :] = src[index[r] - first_index, :] for f32 rows of `width`, or
// zeros where that row falls outside [0, num_src_rows) (as the cuda gather).
void copy_indexed_rows(const float* src, int64_t num_src_rows, int64_t first_index,
                       const int32_t* index, int64_t num_rows, int64_t width, float* out) {
  parallel_for(num_rows, min_rows(width), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t i = index[r] - first_index;
      if (i < 0 || i >= num_src_rows) {
        std::memset(out + r * width, 0, static_cast<size_t>(width) * sizeof(float));
        continue;
      }
      std::memcpy(out + r * width, src + i * width, static_cast<size_t>(width) * sizeof(float));
    }
  });
}

}  // namespace

void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, Tensor& out) {
  assert(table.dtype == DType::kF32 && out.dtype == DType::kF32 && ids.dtype == DType::kI32);
  assert(out.dim(0) == ids.numel() && out.dim(1) == table.dim(1));
  copy_indexed_rows(table.ptr<float>(), table.dim(0), first_row, ids.ptr<int32_t>(), ids.numel(),
                    table.dim(1), out.ptr<float>());
}

void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) {
  assert(x.dtype == DType::kF32 && out.dtype == DType::kF32 && indices.dtype == DType::kI32);
  const int64_t width = x.numel() / x.dim(0);
  assert(out.numel() == indices.numel() * width);
  copy_indexed_rows(x.ptr<float>(), x.dim(0), 0, indices.ptr<int32_t>(), indices.numel(), width,
                    out.ptr<float>());
}

void silu_mul(const Tensor& gate_up, Tensor& out) {
  assert(gate_up.dtype == DType::kF32 && out.dtype == DType::kF32);
  const int64_t num_rows = gate_up.dim(0);
  const int64_t inter = gate_up.dim(1) / 2;
  assert(out.dim(0) == num_rows && out.dim(1) == inter);
  const float* in = gate_up.ptr<float>();
  float* o = out.ptr<float>();
  parallel_for(num_rows, min_rows(inter), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const float* gate = in + t * 2 * inter;
      const float* up = gate + inter;
      for (int64_t i = 0; i < inter; ++i) {
        const float g = gate[i];
        o[t * inter + i] = g / (1.0f + std::exp(-g)) * up[i];
      }
    }
  });
}

void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  assert(gate_up.dtype == DType::kF32 && out.dtype == DType::kF32);
  const int64_t num_rows = gate_up.dim(0);
  const int64_t inter = gate_up.dim(1) / 2;
  assert(out.dim(0) == num_rows && out.dim(1) == inter);
  const float* in = gate_up.ptr<float>();
  float* o = out.ptr<float>();
  const float beta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);  // sqrt(2 / pi)
  const float kappa = 0.044715f;
  parallel_for(num_rows, min_rows(inter), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const float* gate = in + t * 2 * inter;
      const float* up = gate + inter;
      for (int64_t i = 0; i < inter; ++i) {
        const float x = gate[i];
        const float inner = beta * (x + kappa * (x * x * x));
        o[t * inter + i] = 0.5f * x * (1.0f + std::tanh(inner)) * up[i];
      }
    }
  });
}

void scale(Tensor& x, float s) {
  assert(x.dtype == DType::kF32);
  float* p = x.ptr<float>();
  parallel_for(x.numel(), 16384, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) p[i] *= s;
  });
}

void softcap(Tensor& x, float cap) {
  assert(x.dtype == DType::kF32 && cap > 0.0f);
  float* p = x.ptr<float>();
  parallel_for(x.numel(), 16384, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) p[i] = std::tanh(p[i] / cap) * cap;
  });
}

void rope(Tensor& qkv, const QkvLayout& layout, const Tensor& positions, const Tensor& cos_sin) {
  assert(qkv.dtype == DType::kF32 && cos_sin.dtype == DType::kF32);
  assert(positions.dtype == DType::kI32 && qkv.dim(1) == layout.row_width());
  const int64_t num_tokens = qkv.dim(0);
  const int64_t d = layout.head_dim;
  const int64_t r = cos_sin.dim(1);  // rotary width: dims [r, d) of each head pass through
  const int64_t half = r / 2;
  assert(r > 0 && r % 2 == 0 && r <= d);
  const int64_t num_rotated = layout.num_q_heads + layout.num_kv_heads;  // q heads, then k heads
  const int64_t width = layout.row_width();
  const int32_t* pos = positions.ptr<int32_t>();
  const float* table = cos_sin.ptr<float>();
  float* base = qkv.ptr<float>();
  parallel_for(num_tokens, min_rows(num_rotated * r), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      assert(pos[t] >= 0 && pos[t] < cos_sin.dim(0));
      const float* cos = table + static_cast<int64_t>(pos[t]) * r;
      const float* sin = cos + half;
      for (int64_t h = 0; h < num_rotated; ++h) {
        float* x = base + t * width + h * d;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = x[i];
          const float x2 = x[i + half];
          x[i] = x1 * cos[i] - x2 * sin[i];
          x[i + half] = x2 * cos[i] + x1 * sin[i];
        }
      }
    }
  });
}

}  // namespace pagoda::cpu
