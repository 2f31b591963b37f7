// The CUDA backend's mixture-of-experts ops against the CPU reference:
// routing (same ids, weights within f32 rounding; ties to the lower id;
// k = E); the routed experts' SwiGLU MLPs on both fused paths (decode and
// grouped, moe_kernels.h) over many shapes and routings, each deterministic;
// the sigmoid-gated shared-expert add; route + experts replayed in a CUDA
// graph on new routing data. bf16 and f16.
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
  // E <= 256 takes the kernel that keeps p in registers; 257 and 300 the one
  // that recomputes it per pick.
  for (RouteShape s : {RouteShape{1, 8, 2, true}, RouteShape{37, 60, 4, false},
                       RouteShape{300, 128, 8, true}, RouteShape{5, 4, 4, false},
                       RouteShape{9, 256, 8, false}, RouteShape{2, 257, 3, true},
                       RouteShape{33, 300, 6, true}}) {
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

struct ExpertShape {
  int64_t tokens, hidden, inter, experts, k;
};

std::string describe(const ExpertShape& s) {
  return "T=" + std::to_string(s.tokens) + " H=" + std::to_string(s.hidden) +
         " I=" + std::to_string(s.inter) + " E=" + std::to_string(s.experts) +
         " k=" + std::to_string(s.k);
}

// ids and weights from the CPU's moe_route of random logits: k distinct
// experts per token, the usual skew, renormalised or not.
void route_on_cpu(const ExpertShape& s, bool renorm, std::vector<int32_t>* ids,
                  std::vector<float>* weights) {
  Backend& cpu = cpu_backend();
  DevTensor cl(cpu, DType::kF32, {s.tokens, s.experts},
               normal(static_cast<size_t>(s.tokens * s.experts), 0.0f, 2.0f));
  DevTensor ci(cpu, {s.tokens, s.k}, std::vector<int32_t>(static_cast<size_t>(s.tokens * s.k), 0));
  DevTensor cw(cpu, DType::kF32, {s.tokens, s.k});
  cpu.moe_route(cl.t(), renorm, ci.t(), cw.t());
  *ids = ci.download_i32();
  *weights = cw.download();
}

// The gate_up scratch every backend may use (backend.h), in elements of dt.
int64_t scratch_elements(const ExpertShape& s) {
  return (moe_experts_scratch_bytes(s.tokens, s.k, s.hidden) + 1) / 2;
}

// moe_experts on fresh random weights and x, the given routing, against the
// CPU reference; run twice on the GPU, which must give the same bits.
void expect_experts_match(DType dt, const ExpertShape& s, const std::vector<int32_t>& ids,
                          const std::vector<float>& w) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " " + describe(s));
  CudaBackend& gpu = *cuda_backend(dt);
  Backend& cpu = cpu_backend();
  std::vector<float> x = normal(s.tokens * s.hidden, 0.0f, 1.0f);
  std::vector<float> gu = normal(s.experts * 2 * s.inter * s.hidden, 0.0f, 0.1f);
  std::vector<float> down = normal(s.experts * s.hidden * s.inter, 0.0f, 0.1f);
  for (auto* v : {&x, &gu, &down}) round_all(dt, *v);
  DevTensor gx(gpu, dt, {s.tokens, s.hidden}, x),
      ggu(gpu, dt, {s.experts, 2 * s.inter, s.hidden}, gu);
  DevTensor gd(gpu, dt, {s.experts, s.hidden, s.inter}, down), gi(gpu, {s.tokens, s.k}, ids);
  DevTensor gw(gpu, DType::kF32, {s.tokens, s.k}, w);
  DevTensor gs1(gpu, dt, {scratch_elements(s)}), gs2(gpu, dt, {s.tokens * s.k, s.inter});
  DevTensor gout(gpu, dt, {s.tokens, s.hidden});
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    gs1.poison();
    gs2.poison();
    gout.poison();
    gpu.moe_experts(gx.t(), ggu.t(), gd.t(), gi.t(), gw.t(), gs1.t(), gs2.t(), gout.t());
    if (run == 0) first = gout.download();
  }
  expect_equal(gout.download(), first, "moe_experts run twice");
  DevTensor cx(cpu, DType::kF32, {s.tokens, s.hidden}, x);
  DevTensor cgu(cpu, DType::kF32, {s.experts, 2 * s.inter, s.hidden}, gu);
  DevTensor cd(cpu, DType::kF32, {s.experts, s.hidden, s.inter}, down),
      ci(cpu, {s.tokens, s.k}, ids);
  DevTensor cw(cpu, DType::kF32, {s.tokens, s.k}, w), cout(cpu, DType::kF32, {s.tokens, s.hidden});
  DevTensor cs1(cpu, DType::kF32, {1}), cs2(cpu, DType::kF32, {1});  // unused by the CPU
  cpu.moe_experts(cx.t(), cgu.t(), cd.t(), ci.t(), cw.t(), cs1.t(), cs2.t(), cout.t());
  // The GPU rounds the experts' gate and up outputs and activations to the dtype.
  expect_close(first, cout.download(), dt, "moe_experts", 4.0, 4.0);
  expect_status_ok(gpu);
}

// Both paths (decode: T <= 16 and T*k <= 128; grouped: the rest) over token
// counts, expert counts, k, sizes that are not multiples of any tile (and
// I = 12, 40: element loads instead of 16-byte ones), renormalised or not.
TEST(CudaMoeTest, ExpertsMatchCpuOverShapes) {
  PAGODA_REQUIRE_GPU();
  const std::pair<int64_t, int64_t> experts_k[] = {{8, 1}, {8, 2}, {60, 4}, {128, 8}};
  const std::pair<int64_t, int64_t> sizes[] = {{40, 12}, {72, 40}, {200, 72}, {64, 136}};
  int case_index = 0;
  for (DType dt : kHalfTypes) {
    for (int64_t t : {1, 2, 3, 7, 16, 33, 100, 300}) {
      for (const auto& [e, k] : experts_k) {
        // Sizes and renormalisation rotate against (E, k) from one T to the next.
        const auto& [h, in] = sizes[(case_index + case_index / 4) % 4];
        const ExpertShape s{t, h, in, e, k};
        const bool renorm = (case_index + case_index / 4) % 3 != 0;
        ++case_index;
        std::vector<int32_t> ids;
        std::vector<float> w;
        route_on_cpu(s, renorm, &ids, &w);
        expect_experts_match(dt, s, ids, w);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Every token to the same experts (one segment of T rows, several tiles;
// every other expert empty), and experts that no token picks.
TEST(CudaMoeTest, ExpertsMatchCpuWithSkewedRouting) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    for (int64_t t : {1, 5, 16, 33, 300}) {
      for (int64_t k : {1, 2}) {
        const ExpertShape s{t, 72, 40, 60, k};
        std::vector<int32_t> ids(static_cast<size_t>(t * k));
        for (int64_t i = 0; i < t; ++i) {
          ids[static_cast<size_t>(i * k)] = 59;  // the last expert
          if (k == 2) ids[static_cast<size_t>(i * k + 1)] = 3;
        }
        expect_experts_match(dt, s, ids, uniform(static_cast<size_t>(t * k), 0.0f, 1.0f));
      }
      // Only the first 4 of 128 experts picked, k = 4 (every token all four, in shuffled order).
      const ExpertShape s{t, 64, 48, 128, 4};
      std::vector<int32_t> ids(static_cast<size_t>(t * 4));
      for (int64_t i = 0; i < t; ++i) {
        std::vector<int32_t> four = {0, 1, 2, 3};
        std::shuffle(four.begin(), four.end(), rng());
        std::copy(four.begin(), four.end(), ids.begin() + i * 4);
      }
      expect_experts_match(dt, s, ids, uniform(static_cast<size_t>(t * 4), 0.0f, 1.0f));
    }
  }
}

TEST(CudaMoeTest, SharedGateMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    Backend& cpu = cpu_backend();
    const std::pair<int64_t, int64_t> shapes[] = {{1, 64}, {3, 40}, {7, 256}, {33, 2048}};
    for (const auto& [t, h] : shapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " T=" + std::to_string(t));
      std::vector<float> out0 = normal(t * h, 0.0f, 1.0f), x = normal(t * h, 0.0f, 1.0f);
      std::vector<float> y = normal(t * h, 0.0f, 1.0f), gate_w = normal(h, 0.0f, 0.1f);
      for (auto* v : {&out0, &x, &y, &gate_w}) round_all(dt, *v);
      DevTensor gout(gpu, dt, {t, h}, out0), gy(gpu, dt, {t, h}, y), gx(gpu, dt, {t, h}, x);
      DevTensor ggw(gpu, dt, {1, h}, gate_w);
      gpu.add_sigmoid_gated(gout.t(), gy.t(), gx.t(), ggw.t());
      // Both sides start from out0 (the op adds in place).
      DevTensor cout(cpu, DType::kF32, {t, h}, out0), cy(cpu, DType::kF32, {t, h}, y);
      DevTensor cx(cpu, DType::kF32, {t, h}, x), cgw(cpu, DType::kF32, {1, h}, gate_w);
      cpu.add_sigmoid_gated(cout.t(), cy.t(), cx.t(), cgw.t());
      expect_close(gout.download(), cout.download(), dt, "add_sigmoid_gated");
    }
    expect_status_ok(gpu);
  }
}

// moe_route + moe_experts captured once per path (T 4: decode, T 100:
// grouped), replayed on new router logits and x: the same bits as eager
// calls on the new data, and close to the CPU.
TEST(CudaMoeTest, RouteAndExpertsReplayInAGraphWithNewRouting) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  Backend& cpu = cpu_backend();
  const DType dt = DType::kBF16;
  for (int64_t t : {4, 100}) {
    SCOPED_TRACE("T=" + std::to_string(t));
    const ExpertShape s{t, 64, 40, 16, 4};
    std::vector<float> gu = normal(s.experts * 2 * s.inter * s.hidden, 0.0f, 0.1f);
    std::vector<float> down = normal(s.experts * s.hidden * s.inter, 0.0f, 0.1f);
    for (auto* v : {&gu, &down}) round_all(dt, *v);
    DevTensor gx(gpu, dt, {t, s.hidden}), gl(gpu, DType::kF32, {t, s.experts});
    DevTensor ggu(gpu, dt, {s.experts, 2 * s.inter, s.hidden}, gu);
    DevTensor gd(gpu, dt, {s.experts, s.hidden, s.inter}, down);
    DevTensor gi(gpu, {t, s.k}, std::vector<int32_t>(static_cast<size_t>(t * s.k), 0));
    DevTensor gw(gpu, DType::kF32, {t, s.k});
    DevTensor gs1(gpu, dt, {scratch_elements(s)}), gs2(gpu, dt, {t * s.k, s.inter});
    DevTensor eager(gpu, dt, {t, s.hidden}), replayed(gpu, dt, {t, s.hidden});
    auto run = [&](DevTensor& out) {
      gpu.moe_route(gl.t(), true, gi.t(), gw.t());
      gpu.moe_experts(gx.t(), ggu.t(), gd.t(), gi.t(), gw.t(), gs1.t(), gs2.t(), out.t());
    };
    gx.upload(normal(t * s.hidden, 0.0f, 1.0f));
    gl.upload(normal(t * s.experts, 0.0f, 2.0f));
    run(eager);
    const int graph = gpu.capture_graph([&] { run(replayed); });
    ASSERT_GE(graph, 0);
    for (int round = 0; round < 2; ++round) {
      std::vector<float> x = normal(t * s.hidden, 0.0f, 1.0f);
      round_all(dt, x);
      const std::vector<float> logits = normal(t * s.experts, 0.0f, 2.0f);
      gx.upload(x);
      gl.upload(logits);
      replayed.poison();
      gpu.replay_graph(graph);
      const std::vector<float> got = replayed.download();
      run(eager);
      expect_equal(got, eager.download(), "moe graph replay");
      DevTensor cx(cpu, DType::kF32, {t, s.hidden}, x),
          cl(cpu, DType::kF32, {t, s.experts}, logits);
      DevTensor cgu(cpu, DType::kF32, {s.experts, 2 * s.inter, s.hidden}, gu);
      DevTensor cd(cpu, DType::kF32, {s.experts, s.hidden, s.inter}, down);
      DevTensor ci(cpu, {t, s.k}, std::vector<int32_t>(static_cast<size_t>(t * s.k), 0));
      DevTensor cw(cpu, DType::kF32, {t, s.k}), cout(cpu, DType::kF32, {t, s.hidden});
      DevTensor cs(cpu, DType::kF32, {1});
      cpu.moe_route(cl.t(), true, ci.t(), cw.t());
      cpu.moe_experts(cx.t(), cgu.t(), cd.t(), ci.t(), cw.t(), cs.t(), cs.t(), cout.t());
      expect_close(got, cout.download(), dt, "moe graph replay vs cpu", 4.0, 4.0);
    }
  }
  expect_status_ok(gpu);
}

}  // namespace
}  // namespace pagoda::gpu_test
