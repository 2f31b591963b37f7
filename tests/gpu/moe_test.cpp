// The CUDA backend's mixture-of-experts ops against the CPU reference:
// routing (same ids, weights within f32 rounding; ties to the lower id;
// k = E); the routed experts' SwiGLU MLPs on both fused paths (decode and
// grouped, moe_kernels.h) over many shapes and routings, each deterministic,
// the decode path's v2 kernels bit for bit equal to its v1 kernels; model
// layer shapes on the decode path; the sigmoid-gated shared-expert add;
// route + experts replayed in a CUDA graph on new routing data. bf16 and f16.
#include <algorithm>
#include <numeric>

#include "backend/cuda/moe_kernels.h"
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

bool on_decode_path(int64_t tokens, int64_t k) {
  return tokens <= cuda::kMoeDecodeMaxTokens && tokens * k <= cuda::kMoeDecodeMaxSlots;
}

// moe_experts with the decode path's v1 kernels (set_moe_decode_v1), back
// on the default afterwards: the poisoned `out` downloaded.
std::vector<float> run_decode_v1(CudaBackend& gpu, DevTensor& x, DevTensor& gu, DevTensor& down,
                                 DevTensor& ids, DevTensor& w, DevTensor& s1, DevTensor& s2,
                                 DevTensor& out) {
  gpu.set_moe_decode_v1(true);
  out.poison();
  gpu.moe_experts(x.t(), gu.t(), down.t(), ids.t(), w.t(), s1.t(), s2.t(), out.t());
  gpu.set_moe_decode_v1(false);
  return out.download();
}

// moe_experts on fresh random weights and x, the given routing, against the
// CPU reference; run twice on the GPU, which must give the same bits (and
// on the decode path the same bits as its v1 kernels).
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
  if (on_decode_path(s.tokens, s.k)) {
    expect_equal(run_decode_v1(gpu, gx, ggu, gd, gi, gw, gs1, gs2, gout), first,
                 "moe_experts decode v2 vs v1");
  }
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

// n values ~ N(0, stddev) rounded to dt, fast enough for a layer's experts
// (hundreds of millions): 4096-element runs copied from a pool of 2^20 fresh
// normals, each run from its own random offset, so no two weight rows are
// alike.
std::vector<float> big_normal(int64_t n, float stddev, DType dt) {
  constexpr size_t kPool = size_t{1} << 20, kRun = 4096;
  std::vector<float> pool = normal(kPool + kRun, 0.0f, stddev);
  round_all(dt, pool);
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_int_distribution<size_t> offset(0, kPool);
  for (size_t i = 0; i < v.size(); i += kRun) {
    const float* src = pool.data() + offset(rng());
    std::copy(src, src + std::min(kRun, v.size() - i), v.begin() + static_cast<ptrdiff_t>(i));
  }
  return v;
}

struct LayerShape {
  int64_t hidden, inter, experts, k;
  std::vector<int64_t> tokens;  // each <= 16, T * k <= 128: the decode path
};

// One layer's weights for many batches: each T with fresh x and routing
// (from moe_route, or `ids_for` when given), against the CPU and bit for
// bit against the v1 kernels.
void expect_decode_layer_matches(DType dt, const LayerShape& l,
                                 std::vector<int32_t> (*ids_for)(int64_t t, const LayerShape&)) {
  CudaBackend& gpu = *cuda_backend(dt);
  Backend& cpu = cpu_backend();
  const std::vector<float> gu = big_normal(l.experts * 2 * l.inter * l.hidden, 0.05f, dt);
  const std::vector<float> down = big_normal(l.experts * l.hidden * l.inter, 0.05f, dt);
  DevTensor ggu(gpu, dt, {l.experts, 2 * l.inter, l.hidden}, gu);
  DevTensor gd(gpu, dt, {l.experts, l.hidden, l.inter}, down);
  DevTensor cgu(cpu, DType::kF32, {l.experts, 2 * l.inter, l.hidden}, gu);
  DevTensor cd(cpu, DType::kF32, {l.experts, l.hidden, l.inter}, down);
  for (int64_t t : l.tokens) {
    const ExpertShape s{t, l.hidden, l.inter, l.experts, l.k};
    SCOPED_TRACE(std::string(dtype_name(dt)) + " " + describe(s));
    ASSERT_TRUE(on_decode_path(t, l.k));
    std::vector<int32_t> ids;
    std::vector<float> w;
    route_on_cpu(s, t % 2 == 1, &ids, &w);
    if (ids_for != nullptr) ids = ids_for(t, l);
    std::vector<float> x = normal(t * l.hidden, 0.0f, 1.0f);
    round_all(dt, x);
    DevTensor gx(gpu, dt, {t, l.hidden}, x), gi(gpu, {t, l.k}, ids);
    DevTensor gw(gpu, DType::kF32, {t, l.k}, w);
    DevTensor gs1(gpu, dt, {scratch_elements(s)}), gs2(gpu, dt, {t * l.k, l.inter});
    DevTensor gout(gpu, dt, {t, l.hidden});
    gs2.poison();
    gout.poison();
    gpu.moe_experts(gx.t(), ggu.t(), gd.t(), gi.t(), gw.t(), gs1.t(), gs2.t(), gout.t());
    const std::vector<float> got = gout.download();
    gs2.poison();
    expect_equal(run_decode_v1(gpu, gx, ggu, gd, gi, gw, gs1, gs2, gout), got,
                 "moe_experts decode v2 vs v1");
    DevTensor cx(cpu, DType::kF32, {t, l.hidden}, x), ci(cpu, {t, l.k}, ids);
    DevTensor cw(cpu, DType::kF32, {t, l.k}, w), cout(cpu, DType::kF32, {t, l.hidden});
    DevTensor cs(cpu, DType::kF32, {1});
    cpu.moe_experts(cx.t(), cgu.t(), cd.t(), ci.t(), cw.t(), cs.t(), cs.t(), cout.t());
    expect_close(got, cout.download(), dt, "moe_experts decode", 4.0, 4.0);
    expect_status_ok(gpu);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The decode path (v2 kernels, moe_decode_v2.cu) at model layer shapes and
// T 1..16: Qwen3-30B-A3B (2048 x 768, 128 experts, top-8), Qwen1.5-MoE
// (2048 x 1408, 60, top-4), Mixtral's Im 14336 (8 experts, top-2) and H 4096
// at small H / Im so the CPU reference stays quick, E = k = 8 (every expert
// holds every token); H 516 / Im 100 / both odd take the element loads.
TEST(CudaMoeTest, DecodeExpertsMatchCpuAtLayerShapes) {
  PAGODA_REQUIRE_GPU();
  const LayerShape layers[] = {
      {512, 96, 128, 8, {1, 2, 3, 4, 5, 8, 9, 13, 16}},
      {2048, 768, 128, 8, {1, 2, 8, 16}},
      {2048, 1408, 60, 4, {1, 3, 6, 16}},
      {512, 14336, 8, 2, {1, 2, 11, 16}},
      {4096, 96, 8, 1, {1, 4, 7, 16}},
      {4096, 768, 8, 8, {1, 3, 12, 16}},
      {516, 96, 128, 8, {1, 10}},    // gate_up: element loads
      {2048, 100, 60, 4, {2, 16}},   // down: element loads
      {101, 37, 60, 2, {1, 5, 16}},  // both
  };
  for (DType dt : kHalfTypes) {
    for (const LayerShape& l : layers) {
      if (dt == DType::kF16 && l.hidden * l.inter > 2048 * 768) continue;  // bf16 covers these
      expect_decode_layer_matches(dt, l, nullptr);
      if (HasFatalFailure()) return;
    }
  }
}

// Routing the kernels must also take: an expert repeated within a token (a
// group of T k slots, more than one pass of accumulators) and every token on
// the same k experts. (Ids outside [0, E) are outside moe_experts' contract:
// the CPU reference would read past its weights.)
TEST(CudaMoeTest, DecodeExpertsMatchCpuWithRepeatedIds) {
  PAGODA_REQUIRE_GPU();
  auto repeated = [](int64_t t, const LayerShape& l) {
    std::vector<int32_t> ids(static_cast<size_t>(t * l.k));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = i % 3 == 2 ? 5 : 17;
    return ids;
  };
  auto same = [](int64_t t, const LayerShape& l) {
    std::vector<int32_t> ids(static_cast<size_t>(t * l.k));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(l.experts - 1 - i % l.k);
    return ids;
  };
  const LayerShape l{512, 96, 60, 8, {1, 2, 4, 7, 16}};
  for (DType dt : kHalfTypes) {
    for (auto ids_for : {+repeated, +same}) {
      expect_decode_layer_matches(dt, l, ids_for);
      if (HasFatalFailure()) return;
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

// moe_route + moe_experts captured once per path (T 1, 4, 16: decode, on the
// v2 kernels; T 100: grouped), replayed on new router logits and x: the same
// bits as eager calls on the new data, and close to the CPU.
TEST(CudaMoeTest, RouteAndExpertsReplayInAGraphWithNewRouting) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  Backend& cpu = cpu_backend();
  const DType dt = DType::kBF16;
  for (int64_t t : {1, 4, 16, 100}) {
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
