// The FP8 producer ops on CUDA (backend.h rms_norm_fp8, add_rms_norm_fp8,
// silu_mul_fp8, linear_fp8_rows): each output equals the plain op's bit for
// bit (the same kernel arithmetic) and the CPU's within the dtype's
// tolerance; the codes and scales equal launch_fp8_quantize of that output
// bit for bit; linear_fp8_rows equals linear() on the activation the codes
// came from, bit for bit (the same product kernels on the same codes); a
// captured graph replays what eager execution wrote. Fresh random data over
// rows 1..300, widths 1..28672 with and without the 8-element vector path
// (odd k), bf16 and f16. Outputs and codes are poisoned first.
//
// The shapes reach every kernel path: the norm's register kernel (up to 2048
// vectors a row: 16384 wide, 2048 odd) and its wide fallback (28672, 2051,
// 16391); silu_mul_fp8's cluster split (glu_fp8_split.h:
// 14336 wide is 8 CTAs a row at 1, 2, 7 rows, 4 at 33 rows, 2 at 64, 1 at
// 300; 4096 is 4 CTAs a row up to 32 rows) and its wide fallback (28672,
// 28671 and 14335 at 300 rows: more than 4 vectors a thread in one CTA).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/glu_fp8_split.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

const int64_t kRows[] = {1, 2, 7, 33, 64, 300};

// Producer rows [rows, k] on the GPU, poisoned; the codes' buffer holds
// ceil(rows / 16) * 16 rows (backend.h Fp8Rows).
struct DevRows {
  DevRows(Backend& be, int64_t rows, int64_t k)
      : codes(be, DType::kF8E4M3, {(rows + 15) / 16 * 16, k}), scales(be, DType::kF32, {rows}) {
    codes.poison();
    scales.poison();
    view = {Tensor(codes.t().data, DType::kF8E4M3, {rows, k}), scales.t()};
  }
  DevTensor codes, scales;
  Fp8Rows view;
};

// launch_fp8_quantize of a [rows, k] tensor: its codes and scales.
void quantise(CudaBackend& gpu, const Tensor& a, DevRows& q) {
  cuda::Fp8QuantizeParams p;
  p.dtype = a.dtype;
  p.x = a.data;
  p.rows = a.dim(0);
  p.k = a.dim(1);
  p.codes = static_cast<uint8_t*>(q.codes.t().data);
  p.scales = q.scales.t().ptr<float>();
  ASSERT_EQ(cuda::launch_fp8_quantize(p, gpu.stream()), cudaSuccess);
}

// q's codes and scales equal launch_fp8_quantize of `a` (the first rows of the codes).
void expect_codes_of(CudaBackend& gpu, const Tensor& a, DevRows& q, const std::string& what) {
  const int64_t rows = a.dim(0), k = a.dim(1);
  DevRows want(gpu, rows, k);
  quantise(gpu, a, want);
  std::vector<uint8_t> got_c = q.codes.download_bytes(), want_c = want.codes.download_bytes();
  got_c.resize(static_cast<size_t>(rows * k));
  want_c.resize(static_cast<size_t>(rows * k));
  EXPECT_TRUE(got_c == want_c) << what << ": codes differ from launch_fp8_quantize";
  expect_equal(q.scales.download(), want.scales.download(), what + " scales");
}

TEST(CudaFp8ProducerTest, NormsMatchThePlainNormAndTheQuantiseKernel) {
  PAGODA_REQUIRE_GPU();
  Backend& cpu = cpu_backend();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (int64_t rows : kRows) {
      for (int64_t k : {8, 64, 130, 4096, 8192, 14336, 16384, 28672, 7, 1001, 2051, 16391}) {
        const std::string what = std::string(dtype_name(dt)) + " rows=" + std::to_string(rows) +
                                 " k=" + std::to_string(k);
        SCOPED_TRACE(what);
        const std::vector<float> x = normal(static_cast<size_t>(rows * k), 0, 2);
        const std::vector<float> res = normal(x.size(), 0, 2);
        const std::vector<float> w = uniform(static_cast<size_t>(k), 0.5f, 2.0f);
        DevTensor gx(gpu, dt, {rows, k}, x), gw(gpu, dt, {k}, w);
        DevTensor plain(gpu, dt, {rows, k}), out(gpu, dt, {rows, k});
        // rms_norm_fp8
        plain.poison();
        out.poison();
        DevRows q(gpu, rows, k);
        gpu.rms_norm(gx.t(), gw.t(), 1e-5f, plain.t());
        gpu.rms_norm_fp8(gx.t(), gw.t(), 1e-5f, out.t(), q.view);
        expect_equal(out.download(), plain.download(), "rms_norm_fp8 out vs rms_norm");
        expect_codes_of(gpu, out.t(), q, "rms_norm_fp8");
        DevTensor cx(cpu, DType::kF32, {rows, k}, x), cw(cpu, DType::kF32, {k}, w);
        DevTensor cout(cpu, DType::kF32, {rows, k});
        cpu.rms_norm(cx.t(), cw.t(), 1e-5f, cout.t());
        expect_close(out.download(), cout.download(), dt, "rms_norm_fp8 vs cpu");
        // add_rms_norm_fp8: residual updated as add_rms_norm does
        DevTensor r1(gpu, dt, {rows, k}, res), r2(gpu, dt, {rows, k}, res);
        plain.poison();
        out.poison();
        DevRows q2(gpu, rows, k);
        gpu.add_rms_norm(r1.t(), gx.t(), gw.t(), 1e-5f, plain.t());
        gpu.add_rms_norm_fp8(r2.t(), gx.t(), gw.t(), 1e-5f, out.t(), q2.view);
        expect_equal(r2.download(), r1.download(), "add_rms_norm_fp8 residual");
        expect_equal(out.download(), plain.download(), "add_rms_norm_fp8 out vs add_rms_norm");
        expect_codes_of(gpu, out.t(), q2, "add_rms_norm_fp8");
      }
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaFp8ProducerTest, SiluMulMatchesThePlainOpAndTheQuantiseKernel) {
  PAGODA_REQUIRE_GPU();
  Backend& cpu = cpu_backend();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (int64_t rows : kRows) {
      for (int64_t inter : {8, 96, 4096, 14336, 28672, 1, 999, 14335, 28671}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " rows=" + std::to_string(rows) +
                     " inter=" + std::to_string(inter));
        const std::vector<float> gu = normal(static_cast<size_t>(rows * 2 * inter), 0, 3);
        DevTensor ggu(gpu, dt, {rows, 2 * inter}, gu);
        DevTensor plain(gpu, dt, {rows, inter}), out(gpu, dt, {rows, inter});
        plain.poison();
        out.poison();
        DevRows q(gpu, rows, inter);
        gpu.silu_mul(ggu.t(), plain.t());
        gpu.silu_mul_fp8(ggu.t(), out.t(), q.view);
        expect_equal(out.download(), plain.download(), "silu_mul_fp8 out vs silu_mul");
        expect_codes_of(gpu, out.t(), q, "silu_mul_fp8");
        DevTensor cgu(cpu, DType::kF32, {rows, 2 * inter}, gu), cout(cpu, DType::kF32, {rows, inter});
        cpu.silu_mul(cgu.t(), cout.t());
        expect_close(out.download(), cout.download(), dt, "silu_mul_fp8 vs cpu");
      }
    }
    expect_status_ok(gpu);
  }
}

std::vector<uint8_t> random_codes(size_t n) {
  std::vector<int32_t> v = uniform_ints(n, 0, 255);
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((v[i] & 0x7f) == 0x7f ? v[i] ^ 1 : v[i]);
  return b;
}

// An FP8 weight [n, k] with per-row scales on the GPU, prepared.
struct DevWeight {
  DevWeight(CudaBackend& gpu, int64_t n, int64_t k)
      : codes(gpu, DType::kF8E4M3, {n, k}),
        scales(gpu, DType::kF32, {n}, uniform(static_cast<size_t>(n), 1e-4f, 4e-3f)) {
    codes.upload_bytes(random_codes(static_cast<size_t>(n * k)));
    w = LinearWeight(codes.t());
    w.weight_scale = scales.t();
    const Status st = gpu.prepare_fp8_weight(w);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  }
  DevTensor codes, scales;
  LinearWeight w;
};

// Every product path: the decode kernels (<= 8 rows), cuBLASLt (n 320) and
// pagoda's FP8 GEMM (n 200), odd k (the f32 decode kernel per 8 rows).
TEST(CudaFp8ProducerTest, LinearFromRowsEqualsLinearBitForBit) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (int64_t rows : {1, 5, 8, 9, 64, 100, 300}) {
      for (const auto& [n, k] : {std::pair<int64_t, int64_t>{320, 1024}, {200, 1040}, {96, 1001}}) {
        for (bool bias : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " rows=" + std::to_string(rows) + " n=" +
                       std::to_string(n) + " k=" + std::to_string(k) + (bias ? " bias" : ""));
          DevWeight w(gpu, n, k);
          DevTensor x(gpu, dt, {rows, k}, uniform(static_cast<size_t>(rows * k), -2, 2));
          DevTensor b(gpu, dt, {n}, uniform(static_cast<size_t>(n), -1, 1));
          DevTensor want(gpu, dt, {rows, n}), got(gpu, dt, {rows, n});
          want.poison();
          got.poison();
          DevRows q(gpu, rows, k);
          quantise(gpu, x.t(), q);
          gpu.linear(x.t(), w.w, bias ? b.t() : Tensor(), want.t());
          gpu.linear_fp8_rows(q.view, w.w, bias ? b.t() : Tensor(), got.t());
          expect_equal(got.download(), want.download(), "linear_fp8_rows vs linear");
        }
      }
    }
    expect_status_ok(gpu);
  }
}

// silu_mul_fp8's launch shape, on the host (no GPU needed): every row's
// vectors covered by its cluster's threads (at most kGluMaxVecs a thread),
// portable power-of-two clusters, warps of 32, and the sizes the GPU tests
// rely on (the file comment's list).
TEST(GluFp8SplitTest, CoversEveryVectorWithPortableClusters) {
  for (int64_t rows : {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 300, 4096}) {
    for (int64_t groups = 1; groups <= 20000; groups += groups < 600 ? 1 : 37) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " groups=" + std::to_string(groups));
      const cuda::GluFp8Split s = cuda::glu_fp8_split(rows, groups);
      ASSERT_TRUE(s.cluster == 1 || s.cluster == 2 || s.cluster == 4 || s.cluster == 8);
      ASSERT_TRUE(s.cluster == 1 || rows * s.cluster / 2 < cuda::kGluTargetCtas);
      ASSERT_GE(groups, s.cluster == 1 ? 1 : s.cluster * cuda::kGluMinVecsPerCta);
      if (s.threads == 0) {  // the wide kernel: more than 4 vectors a thread
        ASSERT_GT(groups, int64_t{s.cluster} * cuda::kGluMaxRowThreads * cuda::kGluMaxVecs);
        continue;
      }
      ASSERT_EQ(s.threads % 32, 0);
      ASSERT_LE(s.threads, cuda::kGluMaxRowThreads);
      ASSERT_GE(int64_t{s.cluster} * s.threads * cuda::kGluMaxVecs, groups);
      ASSERT_LT(int64_t{s.cluster} * (s.threads - 32), groups);  // no idle warp a CTA
    }
  }
  auto cluster = [](int64_t rows, int64_t inter) {
    const cuda::GluFp8Split s = cuda::glu_fp8_split(rows, inter / 8);
    return s.threads > 0 ? s.cluster : 0;
  };
  EXPECT_EQ(cluster(1, 14336), 8);
  EXPECT_EQ(cluster(7, 14336), 8);
  EXPECT_EQ(cluster(33, 14336), 4);
  EXPECT_EQ(cluster(64, 14336), 2);
  EXPECT_EQ(cluster(300, 14336), 1);
  EXPECT_EQ(cluster(8, 4096), 4);
  EXPECT_EQ(cluster(32, 4096), 4);
  EXPECT_EQ(cluster(300, 28672), 0);
}

// Every element of a float output finite and within +-bound (the test data
// keep real outputs far inside; a clobbered scale shows as 1e19 or inf).
void expect_sane(const std::vector<float>& v, float bound, const std::string& what) {
  size_t bad = 0;
  for (float f : v) bad += !(std::isfinite(f) && std::fabs(f) <= bound);
  EXPECT_EQ(bad, 0u) << what << ": elements outside +-" << bound;
}

// An output of a captured op: its bytes are compared bit for bit; `bound` > 0
// also checks its values (expect_sane); bound 0 for codes.
struct Output {
  DevTensor* t;
  float bound;
};

// Runs `record` once eagerly (lazy workspaces and library handles are made
// outside capture, as the model runner does) and captures it; then 3 times:
// every output poisoned, then fresh inputs (inputs(true): an in-place output
// such as the residual is an input too, so it is set after the poison), an
// eager run and its outputs' bytes; outputs poisoned, the same inputs again
// (inputs(false)), a replay: the same bytes.
void expect_replays_on_new_inputs(CudaBackend& gpu, const std::function<void()>& record,
                                  const std::function<void(bool)>& inputs,
                                  const std::vector<Output>& outputs, const std::string& what) {
  inputs(true);
  record();
  const int id = gpu.capture_graph(record);
  ASSERT_GE(id, 0) << what;
  for (int round = 0; round < 3; ++round) {
    const std::string r = what + " round " + std::to_string(round);
    for (const Output& o : outputs) o.t->poison();
    inputs(true);
    record();
    std::vector<std::vector<uint8_t>> eager;
    for (const Output& o : outputs) {
      eager.push_back(o.t->download_bytes());
      if (o.bound > 0) expect_sane(o.t->download(), o.bound, r + " eager");
    }
    for (const Output& o : outputs) o.t->poison();
    inputs(false);
    gpu.replay_graph(id);
    for (size_t i = 0; i < outputs.size(); ++i)
      EXPECT_TRUE(outputs[i].t->download_bytes() == eager[i])
          << r << ": output " << i << " of the replay differs from eager";
  }
}

// Each producer alone, captured and replayed on new inputs: the norms
// (register and wide kernels), add_rms_norm_fp8 (the residual in place) and
// silu_mul_fp8 at every cluster size (asserted from glu_fp8_split) and its
// wide fallback.
TEST(CudaFp8ProducerTest, EachProducerReplaysAsEager) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (const auto& [rows, k] : {std::pair<int64_t, int64_t>{1, 4096}, {8, 4096}, {33, 8192},
                                  {8, 28672}, {7, 1001}}) {
      const std::string what = std::string(dtype_name(dt)) + " rows=" + std::to_string(rows) +
                               " k=" + std::to_string(k);
      SCOPED_TRACE(what);
      std::vector<float> xv, rv;
      DevTensor x(gpu, dt, {rows, k}), res(gpu, dt, {rows, k}), out(gpu, dt, {rows, k});
      DevTensor w(gpu, dt, {k}, uniform(static_cast<size_t>(k), 0.5f, 2.0f));
      DevRows q(gpu, rows, k);
      auto inputs = [&](bool fresh) {
        if (fresh) {
          xv = normal(static_cast<size_t>(rows * k), 0, 2);
          rv = normal(xv.size(), 0, 2);
        }
        x.upload(xv);
        res.upload(rv);
      };
      const std::vector<Output> outs = {{&out, 1e3f}, {&q.codes, 0}, {&q.scales, 1.0f}};
      expect_replays_on_new_inputs(
          gpu, [&] { gpu.rms_norm_fp8(x.t(), w.t(), 1e-5f, out.t(), q.view); }, inputs, outs,
          "rms_norm_fp8");
      std::vector<Output> add_outs = outs;
      add_outs.push_back({&res, 1e3f});
      expect_replays_on_new_inputs(
          gpu, [&] { gpu.add_rms_norm_fp8(res.t(), x.t(), w.t(), 1e-5f, out.t(), q.view); },
          inputs, add_outs, "add_rms_norm_fp8");
    }
    // {rows, inter, cluster}: cluster 0 = the wide one-CTA-a-row kernel.
    struct SiluCase {
      int64_t rows, inter;
      int cluster;
    };
    for (const SiluCase& c : {SiluCase{1, 14336, 8}, SiluCase{33, 14336, 4}, SiluCase{8, 4096, 4},
                              SiluCase{64, 14336, 2}, SiluCase{300, 14336, 1},
                              SiluCase{300, 28672, 0}, SiluCase{2, 999, 4}}) {
      const std::string what = std::string(dtype_name(dt)) + " rows=" + std::to_string(c.rows) +
                               " inter=" + std::to_string(c.inter);
      SCOPED_TRACE(what);
      const int64_t groups = c.inter % 8 == 0 ? c.inter / 8 : c.inter;
      const cuda::GluFp8Split split = cuda::glu_fp8_split(c.rows, groups);
      EXPECT_EQ(split.threads > 0 ? split.cluster : 0, c.cluster) << "the case's launch shape";
      std::vector<float> guv;
      DevTensor gu(gpu, dt, {c.rows, 2 * c.inter}), act(gpu, dt, {c.rows, c.inter});
      DevRows q(gpu, c.rows, c.inter);
      auto inputs = [&](bool fresh) {
        if (fresh) guv = normal(static_cast<size_t>(c.rows * 2 * c.inter), 0, 3);
        gu.upload(guv);
      };
      expect_replays_on_new_inputs(
          gpu, [&] { gpu.silu_mul_fp8(gu.t(), act.t(), q.view); }, inputs,
          {{&act, 1e3f}, {&q.codes, 0}, {&q.scales, 1.0f}}, "silu_mul_fp8");
    }
    expect_status_ok(gpu);
  }
}

// norm -> linear -> silu_mul -> linear through the codes (each producer's
// codes in their own buffer of ceil(rows / 16) * 16 rows), captured and
// replayed on new inputs; the eager result equals the unfused chain (plain
// op, launch_fp8_quantize, linear_fp8_rows) bit for bit.
TEST(CudaFp8ProducerTest, GraphReplayMatchesEager) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (int64_t rows : {1, 8, 33}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " rows=" + std::to_string(rows));
      const int64_t h = 1024, inter = 4096;  // silu_mul_fp8: 4-CTA clusters
      DevWeight gate_up(gpu, 2 * inter, h), down(gpu, h, inter);
      DevTensor x(gpu, dt, {rows, h});
      DevTensor nw(gpu, dt, {h}, uniform(static_cast<size_t>(h), 0.5f, 2.0f));
      DevTensor normed(gpu, dt, {rows, h}), gu(gpu, dt, {rows, 2 * inter});
      DevTensor act(gpu, dt, {rows, inter}), out(gpu, dt, {rows, h});
      DevRows qn(gpu, rows, h), qa(gpu, rows, inter);
      std::vector<float> xv;
      auto inputs = [&](bool fresh) {
        if (fresh) xv = normal(static_cast<size_t>(rows * h), 0, 1);
        x.upload(xv);
      };
      auto record = [&] {
        gpu.rms_norm_fp8(x.t(), nw.t(), 1e-5f, normed.t(), qn.view);
        gpu.linear_fp8_rows(qn.view, gate_up.w, Tensor(), gu.t());
        gpu.silu_mul_fp8(gu.t(), act.t(), qa.view);
        gpu.linear_fp8_rows(qa.view, down.w, Tensor(), out.t());
      };
      expect_replays_on_new_inputs(gpu, record, inputs,
                                  {{&out, 1e6f}, {&act, 1e6f}, {&qa.scales, 1e4f}}, "chain");
      // The last round's inputs through the unfused ops.
      DevTensor normed2(gpu, dt, {rows, h}), gu2(gpu, dt, {rows, 2 * inter});
      DevTensor act2(gpu, dt, {rows, inter}), out2(gpu, dt, {rows, h});
      DevRows qn2(gpu, rows, h), qa2(gpu, rows, inter);
      out2.poison();
      gpu.rms_norm(x.t(), nw.t(), 1e-5f, normed2.t());
      quantise(gpu, normed2.t(), qn2);
      gpu.linear_fp8_rows(qn2.view, gate_up.w, Tensor(), gu2.t());
      gpu.silu_mul(gu2.t(), act2.t());
      quantise(gpu, act2.t(), qa2);
      gpu.linear_fp8_rows(qa2.view, down.w, Tensor(), out2.t());
      out.poison();
      record();
      expect_equal(out.download(), out2.download(), "chain vs the unfused chain");
    }
    expect_status_ok(gpu);
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
