// The CPU backend's mixture-of-experts ops against naive double-precision
// references written here: routing (softmax, top-k with ties to the lower
// expert id, renormalisation, k = E), the routed experts' SwiGLU MLPs and
// the sigmoid-gated shared-expert add.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "test_util.h"

namespace pagoda {
namespace {

using test::f32;
using test::i32;
using test::Rng;

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route(std::vector<float> logits, int64_t t, int64_t e, int64_t k, bool renorm) {
  CpuBackend be;
  Routed r{std::vector<int32_t>(static_cast<size_t>(t * k), -1), test::nan_filled(t * k)};
  Tensor ids = i32(r.ids, {t, k}), w = f32(r.weights, {t, k});
  be.moe_route(f32(logits, {t, e}), renorm, ids, w);
  return r;
}

TEST(CpuMoe, RouteTakesTheTopKOfTheSoftmax) {
  Rng rng(11);
  for (int iter = 0; iter < 30; ++iter) {
    const int t = rng.randint(1, 9), e = rng.randint(1, 70), k = rng.randint(1, e);
    const bool renorm = rng.randint(0, 1) == 1;
    std::vector<float> logits = rng.floats(static_cast<size_t>(t * e), -4.0f, 4.0f);
    const Routed r = route(logits, t, e, k, renorm);
    for (int row = 0; row < t; ++row) {
      const float* l = logits.data() + row * e;
      std::vector<double> p(static_cast<size_t>(e));
      double sum = 0;
      for (int i = 0; i < e; ++i) sum += p[i] = std::exp(static_cast<double>(l[i]));
      std::vector<int> order(static_cast<size_t>(e));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
      double top = 0;
      for (int j = 0; j < k; ++j) top += p[order[j]] / sum;
      for (int j = 0; j < k; ++j) {
        ASSERT_EQ(r.ids[row * k + j], order[j]) << "row " << row << " slot " << j;
        const double want = p[order[j]] / sum / (renorm ? top : 1.0);
        ASSERT_NEAR(r.weights[row * k + j], want, 1e-6);
      }
    }
  }
}

TEST(CpuMoe, RouteBreaksTiesTowardTheLowerExpertId) {
  // Experts 1, 3 and 4 tie for the top; 0 and 2 tie below them.
  const Routed r = route({0.5f, 2.0f, 0.5f, 2.0f, 2.0f}, 1, 5, 4, false);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3, 4, 0}));
  EXPECT_EQ(r.weights[0], r.weights[1]);
  EXPECT_EQ(r.weights[1], r.weights[2]);
  EXPECT_LT(r.weights[3], r.weights[2]);
  // All equal: the first k ids, each 1/E (1/k renormalised).
  const Routed flat = route({1.0f, 1.0f, 1.0f, 1.0f}, 1, 4, 2, true);
  EXPECT_EQ(flat.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(flat.weights[0], 0.5f);
  EXPECT_FLOAT_EQ(flat.weights[1], 0.5f);
}

TEST(CpuMoe, RouteWithKEqualToEveryExpert) {
  const Routed r = route({0.1f, -1.0f, 3.0f}, 1, 3, 3, true);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 0, 1}));
  EXPECT_NEAR(r.weights[0] + r.weights[1] + r.weights[2], 1.0f, 1e-6);
  const Routed plain = route({0.1f, -1.0f, 3.0f}, 1, 3, 3, false);  // softmax sums to 1 anyway
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(plain.weights[j], r.weights[j], 1e-6);
}

TEST(CpuMoe, ExpertsSumTheWeightedSwiGluOfEachRoutedExpert) {
  CpuBackend be;
  Rng rng(12);
  for (int iter = 0; iter < 20; ++iter) {
    const int t = rng.randint(1, 7), h = rng.randint(1, 40), in = rng.randint(1, 30);
    const int e = rng.randint(1, 9), k = rng.randint(1, e);
    std::vector<float> x = rng.floats(static_cast<size_t>(t * h));
    std::vector<float> gu = rng.floats(static_cast<size_t>(e * 2 * in * h));
    std::vector<float> down = rng.floats(static_cast<size_t>(e * h * in));
    std::vector<int32_t> ids(static_cast<size_t>(t * k));
    std::vector<float> w = rng.floats(static_cast<size_t>(t * k), 0.0f, 1.0f);
    for (int row = 0; row < t; ++row) {  // k distinct experts per token
      std::vector<int32_t> all(static_cast<size_t>(e));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng.engine());
      std::copy(all.begin(), all.begin() + k, ids.begin() + row * k);
    }
    std::vector<float> out = test::nan_filled(static_cast<size_t>(t * h));
    std::vector<float> s1 = test::nan_filled(t * k * 2 * in), s2 = test::nan_filled(t * k * in);
    Tensor o = f32(out, {t, h}), gs = f32(s1, {t * k, 2 * in}), as = f32(s2, {t * k, in});
    be.moe_experts(f32(x, {t, h}), f32(gu, {e, 2 * in, h}), f32(down, {e, h, in}), i32(ids, {t, k}),
                   f32(w, {t, k}), gs, as, o);
    for (int row = 0; row < t; ++row) {
      std::vector<double> want(static_cast<size_t>(h), 0.0);
      for (int j = 0; j < k; ++j) {
        const int ex = ids[row * k + j];
        std::vector<double> act(static_cast<size_t>(in));
        for (int i = 0; i < in; ++i) {
          double g = 0, u = 0;
          for (int c = 0; c < h; ++c) {
            g += static_cast<double>(gu[(ex * 2 * in + i) * h + c]) * x[row * h + c];
            u += static_cast<double>(gu[(ex * 2 * in + in + i) * h + c]) * x[row * h + c];
          }
          act[i] = g / (1 + std::exp(-g)) * u;
        }
        for (int c = 0; c < h; ++c) {
          double y = 0;
          for (int i = 0; i < in; ++i) y += down[(ex * h + c) * in + i] * act[i];
          want[c] += w[row * k + j] * y;
        }
      }
      for (int c = 0; c < h; ++c) ASSERT_NEAR(out[row * h + c], want[c], 1e-4) << row << "," << c;
    }
  }
}

TEST(CpuMoe, AddSigmoidGatedScalesEachRowByItsGate) {
  CpuBackend be;
  // Gate logits x[t] . w: 0 for row 0, -2 for row 1.
  std::vector<float> out = {1, 2, 3, 4}, y = {10, 20, 30, 40}, w = {1, 1};
  std::vector<float> x_rows = {1, -1, 1, -3};
  Tensor o = f32(out, {2, 2});
  be.add_sigmoid_gated(o, f32(y, {2, 2}), f32(x_rows, {2, 2}), f32(w, {1, 2}));
  const double s = 1.0 / (1.0 + std::exp(2.0));
  EXPECT_FLOAT_EQ(out[0], 1 + 0.5f * 10);
  EXPECT_FLOAT_EQ(out[1], 2 + 0.5f * 20);
  EXPECT_NEAR(out[2], 3 + s * 30, 1e-5);
  EXPECT_NEAR(out[3], 4 + s * 40, 1e-5);
}

}  // namespace
}  // namespace pagoda
