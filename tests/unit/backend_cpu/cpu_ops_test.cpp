// Every non-attention, non-sampling op of the CPU backend against naive
// double-precision references written here, over random shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "test_util.h"

namespace pagoda {
namespace {

using test::f32;
using test::i32;
using test::Rng;

// |got - want| <= rel * scale + abs, where scale bounds the summed magnitudes.
void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::vector<double>& scale, double rel, double abs, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i << " not written";
    ASSERT_NEAR(got[i], want[i], rel * scale[i] + abs) << what << " element " << i;
  }
}

std::vector<double> ref_rms_norm_row(const float* x, const float* w, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = x[i] * inv * w[i];
  return out;
}

// The whole table (first_row 0) and a vocab-parallel shard of rows
// [first, first + v): ids of other rows give zero rows.
TEST(CpuOps, Embedding) {
  CpuBackend be;
  Rng rng(1);
  for (int iter = 0; iter < 40; ++iter) {
    const int v = rng.randint(1, 50), h = rng.randint(1, 70), t = rng.randint(1, 40);
    const int first = iter % 2 == 0 ? 0 : rng.randint(0, 60);
    std::vector<float> table = rng.floats(static_cast<size_t>(v * h));
    std::vector<int32_t> ids(static_cast<size_t>(t));
    for (auto& id : ids) id = first == 0 ? rng.randint(0, v - 1) : rng.randint(0, first + v + 20);
    std::vector<float> out = test::nan_filled(static_cast<size_t>(t * h));
    Tensor o = f32(out, {t, h});
    be.embedding(f32(table, {v, h}), i32(ids, {t}), first, o);
    for (int r = 0; r < t; ++r) {
      const int row = ids[r] - first;
      const bool mine = row >= 0 && row < v;
      for (int c = 0; c < h; ++c) ASSERT_EQ(out[r * h + c], mine ? table[row * h + c] : 0.0f);
    }
  }
}

TEST(CpuOps, GatherRows) {
  CpuBackend be;
  Rng rng(2);
  for (int iter = 0; iter < 20; ++iter) {
    const int t = rng.randint(1, 40), h = rng.randint(1, 70), r = rng.randint(1, 40);
    std::vector<float> x = rng.floats(static_cast<size_t>(t * h));
    std::vector<int32_t> idx(static_cast<size_t>(r));
    for (auto& i : idx) i = rng.randint(0, t - 1);
    std::vector<float> out = test::nan_filled(static_cast<size_t>(r * h));
    Tensor o = f32(out, {r, h});
    be.gather_rows(f32(x, {t, h}), i32(idx, {r}), o);
    for (int a = 0; a < r; ++a)
      for (int c = 0; c < h; ++c) ASSERT_EQ(out[a * h + c], x[idx[a] * h + c]);
  }
}

TEST(CpuOps, RmsNormAndAddRmsNorm) {
  CpuBackend be;
  Rng rng(3);
  for (int iter = 0; iter < 40; ++iter) {
    const int t = rng.randint(1, 33), h = rng.pick(std::vector<int>{1, 7, 8, 64, 100, 576, 1000});
    const float eps = rng.pick(std::vector<float>{1e-6f, 1e-5f, 0.1f});
    std::vector<float> x = rng.floats(static_cast<size_t>(t * h), -3, 3);
    std::vector<float> w = rng.floats(static_cast<size_t>(h), 0.5f, 1.5f);
    std::vector<float> res = rng.floats(static_cast<size_t>(t * h), -3, 3);
    const std::vector<float> res0 = res;

    std::vector<float> out = test::nan_filled(x.size());
    Tensor o = f32(out, {t, h});
    be.rms_norm(f32(x, {t, h}), f32(w, {h}), eps, o);
    std::vector<double> want, scale;
    for (int r = 0; r < t; ++r) {
      auto row = ref_rms_norm_row(x.data() + r * h, w.data(), h, eps);
      for (double v : row) want.push_back(v), scale.push_back(std::abs(v));
    }
    expect_close(out, want, scale, 1e-5, 1e-6, "rms_norm");

    // residual += x, then out = rms_norm(residual).
    std::vector<float> out2 = test::nan_filled(x.size());
    Tensor o2 = f32(out2, {t, h});
    Tensor rt = f32(res, {t, h});
    be.add_rms_norm(rt, f32(x, {t, h}), f32(w, {h}), eps, o2);
    want.clear();
    scale.clear();
    for (int r = 0; r < t; ++r) {
      std::vector<float> sum(static_cast<size_t>(h));
      for (int c = 0; c < h; ++c) {
        sum[c] = res0[r * h + c] + x[r * h + c];  // one f32 rounding, as the contract says
        ASSERT_EQ(res[r * h + c], sum[c]);
      }
      auto row = ref_rms_norm_row(sum.data(), w.data(), h, eps);
      for (double v : row) want.push_back(v), scale.push_back(std::abs(v));
    }
    expect_close(out2, want, scale, 1e-5, 1e-6, "add_rms_norm");
  }
}

TEST(CpuOps, QkNormOnlyTouchesQAndKHeads) {
  CpuBackend be;
  Rng rng(4);
  for (int iter = 0; iter < 30; ++iter) {
    QkvLayout l{0, rng.pick(std::vector<int>{1, 2, 4}),
                rng.pick(std::vector<int>{8, 16, 64, 128, 256})};
    l.num_q_heads = l.num_kv_heads * rng.randint(1, 4);
    const int t = rng.randint(1, 9);
    const int64_t width = l.row_width(), d = l.head_dim;
    std::vector<float> qkv = rng.floats(static_cast<size_t>(t * width), -2, 2);
    const std::vector<float> before = qkv;
    std::vector<float> qw = rng.floats(static_cast<size_t>(d), 0.5, 1.5);
    std::vector<float> kw = rng.floats(static_cast<size_t>(d), 0.5, 1.5);
    Tensor q = f32(qkv, {t, width});
    be.qk_norm(q, l, f32(qw, {d}), f32(kw, {d}), 1e-6f);
    for (int r = 0; r < t; ++r) {
      for (int64_t h = 0; h < l.num_q_heads + 2 * l.num_kv_heads; ++h) {
        const int64_t off = r * width + h * d;
        if (h >= l.num_q_heads + l.num_kv_heads) {  // v heads untouched
          for (int64_t i = 0; i < d; ++i) ASSERT_EQ(qkv[off + i], before[off + i]);
          continue;
        }
        auto want = ref_rms_norm_row(before.data() + off, h < l.num_q_heads ? qw.data() : kw.data(),
                                     d, 1e-6);
        for (int64_t i = 0; i < d; ++i)
          ASSERT_NEAR(qkv[off + i], want[i], 1e-5 * std::abs(want[i]) + 1e-6) << "head " << h;
      }
    }
  }
}

TEST(CpuOps, SiluMul) {
  CpuBackend be;
  Rng rng(5);
  for (int iter = 0; iter < 20; ++iter) {
    const int t = rng.randint(1, 20), inter = rng.randint(1, 300);
    std::vector<float> gu = rng.floats(static_cast<size_t>(t * 2 * inter), -8, 8);
    std::vector<float> out = test::nan_filled(static_cast<size_t>(t * inter));
    Tensor o = f32(out, {t, inter});
    be.silu_mul(f32(gu, {t, 2 * inter}), o);
    for (int r = 0; r < t; ++r)
      for (int i = 0; i < inter; ++i) {
        const double g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
        const double want = g / (1.0 + std::exp(-g)) * u;
        ASSERT_NEAR(out[r * inter + i], want, 1e-6 * (1 + std::abs(want)));
      }
  }
}

TEST(CpuOps, GeluTanhMul) {
  CpuBackend be;
  Rng rng(6);
  for (int iter = 0; iter < 20; ++iter) {
    const int t = rng.randint(1, 20), inter = rng.randint(1, 300);
    std::vector<float> gu = rng.floats(static_cast<size_t>(t * 2 * inter), -8, 8);
    std::vector<float> out = test::nan_filled(static_cast<size_t>(t * inter));
    Tensor o = f32(out, {t, inter});
    be.gelu_tanh_mul(f32(gu, {t, 2 * inter}), o);
    for (int r = 0; r < t; ++r)
      for (int i = 0; i < inter; ++i) {
        const double g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
        const double gelu =
            0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
        const double want = gelu * u;
        ASSERT_NEAR(out[r * inter + i], want, 1e-6 * (1 + std::abs(want)));
      }
  }
}

TEST(CpuOps, ScaleAndSoftcap) {
  CpuBackend be;
  Rng rng(7);
  std::vector<float> x = rng.floats(1000, -200, 200), y = x;
  Tensor tx = f32(x, {10, 100});
  be.scale(tx, 8.0f);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i] * 8.0f);
  be.softcap(tx, 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 30.0 * std::tanh(static_cast<double>(y[i]) * 8.0 / 30.0);
    ASSERT_NEAR(x[i], want, 2e-6 * 30.0);
    ASSERT_LE(std::abs(x[i]), 30.0f);
  }
}

// x @ w^T + b in double; scale[i] = sum |x w| + |b| bounds the rounding error.
void ref_linear(const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& b, int t, int k, int n, std::vector<double>* out,
                std::vector<double>* scale) {
  out->assign(static_cast<size_t>(t * n), 0.0);
  scale->assign(static_cast<size_t>(t * n), 0.0);
  for (int r = 0; r < t; ++r)
    for (int c = 0; c < n; ++c) {
      double s = b.empty() ? 0.0 : b[c], a = b.empty() ? 0.0 : std::abs(b[c]);
      for (int i = 0; i < k; ++i) {
        s += static_cast<double>(x[r * k + i]) * w[c * k + i];
        a += std::abs(static_cast<double>(x[r * k + i]) * w[c * k + i]);
      }
      (*out)[r * n + c] = s;
      (*scale)[r * n + c] = a;
    }
}

TEST(CpuOps, LinearRandomShapes) {
  CpuBackend be;
  Rng rng(6);
  const std::vector<int> rows = {1, 2, 3, 4, 5, 17, 64, 65, 130};
  const std::vector<int> ks = {1, 7, 8, 9, 16, 63, 64, 100, 576};
  const std::vector<int> ns = {1, 2, 3, 5, 64, 65, 200};
  for (int iter = 0; iter < 60; ++iter) {
    const int t = rng.pick(rows), k = rng.pick(ks), n = rng.pick(ns);
    const bool with_bias = rng.randint(0, 1) == 1;
    std::vector<float> x = rng.floats(static_cast<size_t>(t * k));
    std::vector<float> w = rng.floats(static_cast<size_t>(n * k));
    std::vector<float> b = with_bias ? rng.floats(static_cast<size_t>(n)) : std::vector<float>{};
    std::vector<float> out = test::nan_filled(static_cast<size_t>(t * n));
    Tensor o = f32(out, {t, n});
    be.linear(f32(x, {t, k}), f32(w, {n, k}), with_bias ? f32(b, {n}) : Tensor(), o);
    std::vector<double> want, scale;
    ref_linear(x, w, b, t, k, n, &want, &scale);
    expect_close(out, want, scale, 1.2e-7 * (k + 16), 1e-7, "linear");
  }
}

// Each row's result is bit-identical whether computed alone or in a batch.
TEST(CpuOps, LinearIsBatchInvariant) {
  CpuBackend be;
  Rng rng(7);
  const int t = 37, k = 203, n = 131;
  std::vector<float> x = rng.floats(static_cast<size_t>(t * k));
  std::vector<float> w = rng.floats(static_cast<size_t>(n * k));
  std::vector<float> b = rng.floats(static_cast<size_t>(n));
  std::vector<float> all(static_cast<size_t>(t * n));
  Tensor o = f32(all, {t, n});
  be.linear(f32(x, {t, k}), f32(w, {n, k}), f32(b, {n}), o);
  for (int r = 0; r < t; ++r) {
    std::vector<float> xr(x.begin() + r * k, x.begin() + (r + 1) * k), one(static_cast<size_t>(n));
    Tensor o1 = f32(one, {1, n});
    be.linear(f32(xr, {1, k}), f32(w, {n, k}), f32(b, {n}), o1);
    ASSERT_EQ(0, std::memcmp(one.data(), all.data() + r * n, n * sizeof(float))) << "row " << r;
  }
}

// Both instruction-set levels (where compiled) against the reference, and
// dot() against gemm() bit for bit.
TEST(CpuOps, KernelLevelsAgree) {
  Rng rng(8);
  std::vector<const cpu::CpuKernels*> levels = {cpu::generic_kernels()};
#if defined(__x86_64__)
  if (cpu::avx2_kernels() != nullptr && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    levels.push_back(cpu::avx2_kernels());
#endif
  for (const cpu::CpuKernels* kern : levels) {
    for (int iter = 0; iter < 30; ++iter) {
      const int t = rng.randint(1, 9), k = rng.randint(1, 300), n = rng.randint(1, 9);
      std::vector<float> x = rng.floats(static_cast<size_t>(t * k)),
                         w = rng.floats(static_cast<size_t>(n * k));
      std::vector<float> b = rng.floats(static_cast<size_t>(n));
      std::vector<float> out = test::nan_filled(static_cast<size_t>(t * n));
      kern->gemm(x.data(), t, w.data(), n, k, b.data(), out.data(), n);
      std::vector<double> want, scale;
      ref_linear(x, w, b, t, k, n, &want, &scale);
      expect_close(out, want, scale, 1.2e-7 * (k + 16), 1e-7, kern->isa);
      kern->gemm(x.data(), t, w.data(), n, k, nullptr, out.data(), n);
      for (int r = 0; r < t; ++r)
        for (int c = 0; c < n; ++c)
          ASSERT_EQ(out[r * n + c], kern->dot(x.data() + r * k, w.data() + c * k, k)) << kern->isa;
      std::vector<float> y = rng.floats(static_cast<size_t>(k)), y0 = y;
      kern->axpy(0.75f, x.data(), y.data(), k);
      for (int i = 0; i < k; ++i) ASSERT_NEAR(y[i], y0[i] + 0.75 * x[i], 1e-6);
    }
  }
}

TEST(CpuOps, RopeMatchesDirectFormula) {
  CpuBackend be;
  Rng rng(9);
  for (int iter = 0; iter < 30; ++iter) {
    QkvLayout l{0, rng.pick(std::vector<int>{1, 2, 3}), 2 * rng.randint(1, 64)};
    l.num_q_heads = l.num_kv_heads * rng.randint(1, 4);
    const int64_t d = l.head_dim, half = d / 2, width = l.row_width();
    const int t = rng.randint(1, 12), num_pos = rng.randint(1, 5000);
    std::vector<double> freq(static_cast<size_t>(half));
    for (auto& f : freq) f = std::pow(10.0, rng.uniform(-4, 0));
    std::vector<float> table(static_cast<size_t>(num_pos * d));
    for (int p = 0; p < num_pos; ++p)
      for (int64_t i = 0; i < half; ++i) {
        table[p * d + i] = static_cast<float>(std::cos(p * freq[i]));
        table[p * d + half + i] = static_cast<float>(std::sin(p * freq[i]));
      }
    std::vector<int32_t> pos(static_cast<size_t>(t));
    for (auto& p : pos) p = rng.randint(0, num_pos - 1);
    std::vector<float> qkv = rng.floats(static_cast<size_t>(t * width)), before = qkv;
    Tensor q = f32(qkv, {t, width});
    be.rope(q, l, i32(pos, {t}), f32(table, {num_pos, d}));
    for (int r = 0; r < t; ++r)
      for (int64_t h = 0; h < l.num_q_heads + 2 * l.num_kv_heads; ++h) {
        const float* x = before.data() + r * width + h * d;
        const float* y = qkv.data() + r * width + h * d;
        const bool rotated = h < l.num_q_heads + l.num_kv_heads;
        for (int64_t i = 0; i < half; ++i) {
          const double a = pos[r] * freq[i];
          const double c = rotated ? std::cos(a) : 1.0, s = rotated ? std::sin(a) : 0.0;
          ASSERT_NEAR(y[i], x[i] * c - x[i + half] * s, 2e-6) << "head " << h;
          ASSERT_NEAR(y[i + half], x[i + half] * c + x[i] * s, 2e-6) << "head " << h;
        }
      }
  }
}

// A partial rotary embedding (Phi-4-mini: 96 of 128): cos_sin [P, R] with
// R < D rotates the pairs (i, i + R/2), i < R/2, of each q / k head and
// leaves dims [R, D) and the v heads bit-exact (R = D: the full rotation).
TEST(CpuOps, RopePartialRotatesOnlyTheFirstRotaryDims) {
  CpuBackend be;
  Rng rng(19);
  for (int iter = 0; iter < 30; ++iter) {
    QkvLayout l{0, rng.pick(std::vector<int>{1, 2, 3}), 2 * rng.randint(2, 64)};
    l.num_q_heads = l.num_kv_heads * rng.randint(1, 4);
    const int64_t d = l.head_dim, width = l.row_width();
    const int64_t r = iter == 0 ? d : 2 * rng.randint(1, static_cast<int>(d / 2));  // 0: full
    const int64_t half = r / 2;
    const int t = rng.randint(1, 12), num_pos = rng.randint(1, 3000);
    std::vector<double> freq(static_cast<size_t>(half));
    for (auto& f : freq) f = std::pow(10.0, rng.uniform(-4, 0));
    std::vector<float> table(static_cast<size_t>(num_pos * r));
    for (int p = 0; p < num_pos; ++p)
      for (int64_t i = 0; i < half; ++i) {
        table[p * r + i] = static_cast<float>(std::cos(p * freq[i]));
        table[p * r + half + i] = static_cast<float>(std::sin(p * freq[i]));
      }
    std::vector<int32_t> pos(static_cast<size_t>(t));
    for (auto& p : pos) p = rng.randint(0, num_pos - 1);
    std::vector<float> qkv = rng.floats(static_cast<size_t>(t * width)), before = qkv;
    Tensor q = f32(qkv, {t, width});
    be.rope(q, l, i32(pos, {t}), f32(table, {num_pos, r}));
    for (int row = 0; row < t; ++row)
      for (int64_t h = 0; h < l.num_q_heads + 2 * l.num_kv_heads; ++h) {
        SCOPED_TRACE("head_dim " + std::to_string(d) + " rotary " + std::to_string(r) + " head " +
                     std::to_string(h));
        const float* x = before.data() + row * width + h * d;
        const float* y = qkv.data() + row * width + h * d;
        const bool rotated = h < l.num_q_heads + l.num_kv_heads;
        for (int64_t i = 0; i < half; ++i) {
          const double a = pos[row] * freq[i];
          const double c = rotated ? std::cos(a) : 1.0, s = rotated ? std::sin(a) : 0.0;
          ASSERT_NEAR(y[i], x[i] * c - x[i + half] * s, 2e-6);
          ASSERT_NEAR(y[i + half], x[i + half] * c + x[i] * s, 2e-6);
        }
        for (int64_t i = r; i < d; ++i) ASSERT_EQ(y[i], x[i]) << "pass-through dim " << i;
      }
  }
}

TEST(CpuOps, KvWriteSkipsNegativeSlotsAndCopyBlocks) {
  CpuBackend be;
  Rng rng(10);
  for (int iter = 0; iter < 20; ++iter) {
    QkvLayout l{0, rng.pick(std::vector<int>{1, 2, 4}), rng.pick(std::vector<int>{8, 24, 64})};
    l.num_q_heads = l.num_kv_heads * rng.randint(1, 3);
    const int bs = rng.pick(std::vector<int>{1, 7, 16});
    const int num_blocks = rng.randint(2, 12), t = rng.randint(1, 20);
    const int64_t kvw = l.num_kv_heads * l.head_dim, width = l.row_width();
    const int64_t num_slots = static_cast<int64_t>(num_blocks) * bs;
    std::vector<float> k = rng.floats(static_cast<size_t>(num_slots * kvw)),
                       v = rng.floats(k.size());
    const std::vector<float> k0 = k, v0 = v;
    std::vector<float> qkv = rng.floats(static_cast<size_t>(t * width));
    std::vector<int32_t> slots(static_cast<size_t>(t));
    std::vector<int> owner(static_cast<size_t>(num_slots), -1);  // token written to each slot
    for (int r = 0; r < t; ++r) {
      int s = rng.randint(-1, static_cast<int>(num_slots) - 1);
      if (s >= 0 && owner[s] >= 0) s = -1;  // distinct slots only
      slots[r] = s;
      if (s >= 0) owner[s] = r;
    }
    KvCacheView cache{f32(k, {num_blocks, bs, l.num_kv_heads, l.head_dim}),
                      f32(v, {num_blocks, bs, l.num_kv_heads, l.head_dim}), bs, Tensor()};
    be.kv_write(f32(qkv, {t, width}), l, i32(slots, {t}), cache);
    const int64_t koff = l.num_q_heads * l.head_dim;
    for (int64_t s = 0; s < num_slots; ++s)
      for (int64_t i = 0; i < kvw; ++i) {
        const int r = owner[s];
        ASSERT_EQ(k[s * kvw + i], r >= 0 ? qkv[r * width + koff + i] : k0[s * kvw + i]);
        ASSERT_EQ(v[s * kvw + i], r >= 0 ? qkv[r * width + koff + kvw + i] : v0[s * kvw + i]);
      }

    // copy_blocks over two "layers": block src[i] -> dst[i] in k and v.
    std::vector<float> k2 = rng.floats(k.size()), v2 = rng.floats(k.size());
    std::vector<KvCacheView> caches = {
        cache,
        {f32(k2, {num_blocks, bs, l.num_kv_heads, l.head_dim}),
         f32(v2, {num_blocks, bs, l.num_kv_heads, l.head_dim}), bs, Tensor()}};
    const std::vector<float> k_before = k, v2_before = v2;
    std::vector<int32_t> src = {0, num_blocks - 1}, dst = {1, 0};
    if (num_blocks == 2) src = {0}, dst = {1};
    be.copy_blocks(caches, src, dst);
    const int64_t be_elems = bs * kvw;
    for (size_t i = 0; i < src.size(); ++i)
      for (int64_t e = 0; e < be_elems; ++e) {
        ASSERT_EQ(k[dst[i] * be_elems + e], k_before[src[i] * be_elems + e]);
        ASSERT_EQ(v2[dst[i] * be_elems + e], v2_before[src[i] * be_elems + e]);
      }
  }
}

TEST(CpuBackend, MemoryAndCopies) {
  CpuBackend be;
  EXPECT_EQ(be.kind(), DeviceKind::kCpu);
  EXPECT_EQ(be.compute_dtype(), DType::kF32);
  EXPECT_NE(be.name().find("cpu"), std::string::npos);
  size_t free_bytes = 0, total = 0;
  be.memory_info(&free_bytes, &total);
  EXPECT_GT(total, 0u);
  EXPECT_GT(free_bytes, 0u);
  EXPECT_LE(free_bytes, total);
  void* p = be.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::vector<uint8_t> src(1000), dst(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  be.copy_to_device(p, src.data(), src.size());
  be.copy_to_host(dst.data(), p, dst.size());
  EXPECT_EQ(src, dst);
  be.deallocate(p);
}

}  // namespace
}  // namespace pagoda
