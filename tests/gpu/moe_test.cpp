// The CUDA backend's mixture-of-experts ops against the CPU reference:
// routing (same ids, weights within f32 rounding; ties to the lower id;
// k = E), the routed experts' SwiGLU MLPs and the sigmoid-gated shared
// expert add, in bf16 and f16, and moe_experts captured in a CUDA graph.
#include <algorithm>
#include <numeric>

#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

struct RouteShape {
  int64_t tokens, experts, k;
  bool renorm;
};

TEST(CudaMoeTest, RouteMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  Backend& cpu = cpu_backend();
  for (RouteShape s : {RouteShape{1, 8, 2, true}, RouteShape{37, 60, 4, false},
                       RouteShape{300, 128, 8, true}, RouteShape{5, 4, 4, false}}) {
    SCOPED_TRACE("T=" + std::to_string(s.tokens) + " E=" + std::to_string(s.experts));
    std::vector<float> logits = normal(static_cast<size_t>(s.tokens * s.experts), 0.0f, 2.0f);
    if (s.tokens == 5) std::fill(logits.begin(), logits.begin() + 4, 1.0f);  // a tied row
    DevTensor gl(gpu, DType::kF32, {s.tokens, s.experts}, logits);
    DevTensor gi(gpu, {s.tokens, s.k}, std::vector<int32_t>(s.tokens * s.k, -7));
    DevTensor gw(gpu, DType::kF32, {s.tokens, s.k});
    gw.poison();
    gpu.moe_route(gl.t(), s.renorm, gi.t(), gw.t());
    DevTensor cl(cpu, DType::kF32, {s.tokens, s.experts}, logits);
    DevTensor ci(cpu, {s.tokens, s.k}, std::vector<int32_t>(s.tokens * s.k, -7));
    DevTensor cw(cpu, DType::kF32, {s.tokens, s.k});
    cpu.moe_route(cl.t(), s.renorm, ci.t(), cw.t());
    EXPECT_EQ(gi.download_i32(), ci.download_i32());
    const std::vector<float> a = gw.download(), b = cw.download();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6) << i;
    if (s.tokens == 5) {
      EXPECT_EQ(gi.download_i32()[0], 0);  // the tie goes to expert 0
    }
  }
  expect_status_ok(gpu);
}

TEST(CudaMoeTest, ExpertsAndSharedGateMatchCpu) {
  PAGODA_REQUIRE_GPU();
  struct Shape {
    int64_t tokens, hidden, inter, experts, k;
  };
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    Backend& cpu = cpu_backend();
    for (Shape s : {Shape{1, 64, 32, 8, 2}, Shape{7, 256, 96, 16, 4}, Shape{33, 128, 24, 6, 6},
                    Shape{3, 40, 12, 5, 1}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " T=" + std::to_string(s.tokens));
      std::vector<float> x = normal(s.tokens * s.hidden, 0.0f, 1.0f);
      std::vector<float> gu = normal(s.experts * 2 * s.inter * s.hidden, 0.0f, 0.1f);
      std::vector<float> down = normal(s.experts * s.hidden * s.inter, 0.0f, 0.1f);
      std::vector<float> gate_w = normal(s.hidden, 0.0f, 0.1f),
                         y = normal(s.tokens * s.hidden, 0.0f, 1.0f);
      for (auto* v : {&x, &gu, &down, &gate_w, &y}) round_all(dt, *v);
      std::vector<int32_t> ids(static_cast<size_t>(s.tokens * s.k));
      for (int64_t t = 0; t < s.tokens; ++t) {  // k distinct experts per token
        std::vector<int32_t> all(static_cast<size_t>(s.experts));
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng());
        std::copy(all.begin(), all.begin() + s.k, ids.begin() + t * s.k);
      }
      const std::vector<float> w = uniform(s.tokens * s.k, 0.0f, 1.0f);
      DevTensor gx(gpu, dt, {s.tokens, s.hidden}, x),
          ggu(gpu, dt, {s.experts, 2 * s.inter, s.hidden}, gu);
      DevTensor gd(gpu, dt, {s.experts, s.hidden, s.inter}, down), gi(gpu, {s.tokens, s.k}, ids);
      DevTensor gw(gpu, DType::kF32, {s.tokens, s.k}, w), gout(gpu, dt, {s.tokens, s.hidden});
      DevTensor gs1(gpu, dt, {s.tokens * s.k, 2 * s.inter}),
          gs2(gpu, dt, {s.tokens * s.k, s.inter});
      gout.poison();
      gpu.moe_experts(gx.t(), ggu.t(), gd.t(), gi.t(), gw.t(), gs1.t(), gs2.t(), gout.t());
      DevTensor cx(cpu, DType::kF32, {s.tokens, s.hidden}, x);
      DevTensor cgu(cpu, DType::kF32, {s.experts, 2 * s.inter, s.hidden}, gu);
      DevTensor cd(cpu, DType::kF32, {s.experts, s.hidden, s.inter}, down),
          ci(cpu, {s.tokens, s.k}, ids);
      DevTensor cw(cpu, DType::kF32, {s.tokens, s.k}, w),
          cout(cpu, DType::kF32, {s.tokens, s.hidden});
      DevTensor cs1(cpu, DType::kF32, {s.tokens * s.k, 2 * s.inter});
      DevTensor cs2(cpu, DType::kF32, {s.tokens * s.k, s.inter});
      cpu.moe_experts(cx.t(), cgu.t(), cd.t(), ci.t(), cw.t(), cs1.t(), cs2.t(), cout.t());
      // The GPU rounds the experts' gate_up outputs and activations to the dtype.
      expect_close(gout.download(), cout.download(), dt, "moe_experts", 4.0, 4.0);

      DevTensor gy(gpu, dt, {s.tokens, s.hidden}, y), ggw(gpu, dt, {1, s.hidden}, gate_w);
      DevTensor cy(cpu, DType::kF32, {s.tokens, s.hidden}, y),
          cgw(cpu, DType::kF32, {1, s.hidden}, gate_w);
      // The same starting values on both sides: read before the GPU's in-place add.
      cout.upload(gout.download());
      gpu.add_sigmoid_gated(gout.t(), gy.t(), gx.t(), ggw.t());
      cpu.add_sigmoid_gated(cout.t(), cy.t(), cx.t(), cgw.t());
      expect_close(gout.download(), cout.download(), dt, "add_sigmoid_gated");
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaMoeTest, RouteAndExpertsReplayInAGraph) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const int64_t t = 4, h = 64, in = 32, e = 8, k = 2;
  std::vector<float> x = normal(t * h, 0.0f, 1.0f), logits = normal(t * e, 0.0f, 2.0f);
  std::vector<float> gu = normal(e * 2 * in * h, 0.0f, 0.1f), down = normal(e * h * in, 0.0f, 0.1f);
  DevTensor gx(gpu, DType::kBF16, {t, h}, x), gl(gpu, DType::kF32, {t, e}, logits);
  DevTensor ggu(gpu, DType::kBF16, {e, 2 * in, h}, gu), gd(gpu, DType::kBF16, {e, h, in}, down);
  DevTensor gi(gpu, {t, k}, std::vector<int32_t>(t * k, 0)), gw(gpu, DType::kF32, {t, k});
  DevTensor gs1(gpu, DType::kBF16, {t * k, 2 * in}), gs2(gpu, DType::kBF16, {t * k, in});
  DevTensor eager(gpu, DType::kBF16, {t, h}), replayed(gpu, DType::kBF16, {t, h});
  auto run = [&](DevTensor& out) {
    gpu.moe_route(gl.t(), true, gi.t(), gw.t());
    gpu.moe_experts(gx.t(), ggu.t(), gd.t(), gi.t(), gw.t(), gs1.t(), gs2.t(), out.t());
  };
  run(eager);
  const int graph = gpu.capture_graph([&] { run(replayed); });
  ASSERT_GE(graph, 0);
  replayed.poison();
  gpu.replay_graph(graph);
  expect_equal(replayed.download(), eager.download(), "moe graph replay");
  expect_status_ok(gpu);
}

}  // namespace
}  // namespace pagoda::gpu_test
