// Every non-attention, non-sampling op of the CUDA backend against the CPU
// reference (see test_util.h for the method and tolerances), plus CUDA graph
// capture/replay and error reporting.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

std::string name_of(DType t) { return std::string(dtype_name(t)); }

TEST(CudaBackendTest, ReportsDevice) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  EXPECT_EQ(gpu.kind(), DeviceKind::kCuda);
  EXPECT_FALSE(gpu.name().empty());
  EXPECT_EQ(gpu.compute_dtype(), DType::kBF16);
  EXPECT_EQ(cuda_backend(DType::kF16)->compute_dtype(), DType::kF16);
  size_t free_bytes = 0, total_bytes = 0;
  gpu.memory_info(&free_bytes, &total_bytes);
  EXPECT_GT(total_bytes, size_t{1} << 30);
  EXPECT_LE(free_bytes, total_bytes);
  EXPECT_TRUE(gpu.supports_graphs());
  expect_status_ok(gpu);
}

TEST(CudaBackendTest, RejectsUnsupportedComputeDtype) {
  PAGODA_REQUIRE_GPU();
  EXPECT_EQ(create_cuda_backend(0, DType::kF32), nullptr);
  EXPECT_EQ(create_cuda_backend(1 << 20, DType::kBF16), nullptr);
}

TEST(CudaOpsTest, EmbeddingAndGatherRowsCopyExactly) {
  PAGODA_REQUIRE_GPU();
  struct Shape { int64_t vocab, hidden, tokens; };
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (Shape s : {Shape{50, 64, 1}, Shape{1000, 100, 7}, Shape{3000, 4096, 300}, Shape{17, 3, 5}}) {
      SCOPED_TRACE(name_of(dt) + " V=" + std::to_string(s.vocab) + " H=" + std::to_string(s.hidden));
      std::vector<float> table = uniform(static_cast<size_t>(s.vocab * s.hidden), -2, 2);
      round_all(dt, table);
      const std::vector<int32_t> ids = uniform_ints(static_cast<size_t>(s.tokens), 0, static_cast<int32_t>(s.vocab - 1));
      DevTensor g_table(gpu, dt, {s.vocab, s.hidden}, table);
      DevTensor g_ids(gpu, {s.tokens}, ids);
      DevTensor g_out(gpu, dt, {s.tokens, s.hidden});
      g_out.poison();
      gpu.embedding(g_table.t(), g_ids.t(), 0, g_out.t());
      Backend& cpu = cpu_backend();
      DevTensor c_table(cpu, DType::kF32, {s.vocab, s.hidden}, table);
      DevTensor c_ids(cpu, {s.tokens}, ids);
      DevTensor c_out(cpu, DType::kF32, {s.tokens, s.hidden});
      cpu.embedding(c_table.t(), c_ids.t(), 0, c_out.t());
      expect_equal(g_out.download(), c_out.download(), "embedding");

      // A vocab-parallel shard: the table holds rows [first, first + V) of a
      // larger vocab; ids of other rows (both sides, the edges) give zeros.
      const int64_t first = s.vocab / 2 + 1;
      std::vector<int32_t> shard_ids = uniform_ints(static_cast<size_t>(s.tokens), 0,
                                                    static_cast<int32_t>(first + s.vocab + 5));
      shard_ids[0] = static_cast<int32_t>(first);
      if (s.tokens > 1) shard_ids[1] = static_cast<int32_t>(first + s.vocab - 1);
      if (s.tokens > 2) shard_ids[2] = static_cast<int32_t>(first + s.vocab);
      if (s.tokens > 3) shard_ids[3] = static_cast<int32_t>(first - 1);
      DevTensor gs_ids(gpu, {s.tokens}, shard_ids);
      g_out.poison();
      gpu.embedding(g_table.t(), gs_ids.t(), first, g_out.t());
      DevTensor cs_ids(cpu, {s.tokens}, shard_ids);
      cpu.embedding(c_table.t(), cs_ids.t(), first, c_out.t());
      expect_equal(g_out.download(), c_out.download(), "embedding shard");

      // gather_rows: pick rows of the embedded batch (repeats allowed).
      const std::vector<int32_t> idx = uniform_ints(9, 0, static_cast<int32_t>(s.tokens - 1));
      DevTensor g_idx(gpu, {9}, idx);
      DevTensor g_rows(gpu, dt, {9, s.hidden});
      g_rows.poison();
      gpu.gather_rows(g_out.t(), g_idx.t(), g_rows.t());
      DevTensor c_idx(cpu, {9}, idx);
      DevTensor c_rows(cpu, DType::kF32, {9, s.hidden});
      cpu.gather_rows(c_out.t(), c_idx.t(), c_rows.t());
      expect_equal(g_rows.download(), c_rows.download(), "gather_rows");
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaOpsTest, RmsNormMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  struct Shape { int64_t rows, hidden; float eps; };
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (Shape s : {Shape{1, 8, 1e-6f}, Shape{5, 60, 1e-5f}, Shape{257, 896, 1e-6f},
                    Shape{33, 4096, 1e-5f}, Shape{3, 8192, 1e-6f}, Shape{2, 13, 1e-6f}}) {
      SCOPED_TRACE(name_of(dt) + " rows=" + std::to_string(s.rows) + " H=" + std::to_string(s.hidden));
      std::vector<float> x = normal(static_cast<size_t>(s.rows * s.hidden), 0.0f, 3.0f);
      std::vector<float> w = uniform(static_cast<size_t>(s.hidden), 0.5f, 1.5f);
      round_all(dt, x);
      round_all(dt, w);
      DevTensor gx(gpu, dt, {s.rows, s.hidden}, x), gw(gpu, dt, {s.hidden}, w);
      DevTensor gout(gpu, dt, {s.rows, s.hidden});
      gout.poison();
      gpu.rms_norm(gx.t(), gw.t(), s.eps, gout.t());
      Backend& cpu = cpu_backend();
      DevTensor cx(cpu, DType::kF32, {s.rows, s.hidden}, x), cw(cpu, DType::kF32, {s.hidden}, w);
      DevTensor cout(cpu, DType::kF32, {s.rows, s.hidden});
      cpu.rms_norm(cx.t(), cw.t(), s.eps, cout.t());
      expect_close(gout.download(), cout.download(), dt, "rms_norm");
      // In place (out aliases x).
      gpu.rms_norm(gx.t(), gw.t(), s.eps, gx.t());
      expect_close(gx.download(), cout.download(), dt, "rms_norm in place");
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaOpsTest, AddRmsNormMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  struct Shape { int64_t rows, hidden; };
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (Shape s : {Shape{1, 64}, Shape{7, 100}, Shape{129, 2048}, Shape{16, 4096}}) {
      SCOPED_TRACE(name_of(dt) + " rows=" + std::to_string(s.rows) + " H=" + std::to_string(s.hidden));
      const size_t n = static_cast<size_t>(s.rows * s.hidden);
      std::vector<float> res = normal(n, 0.0f, 2.0f), x = normal(n, 0.0f, 1.0f);
      std::vector<float> w = uniform(static_cast<size_t>(s.hidden), 0.5f, 1.5f);
      round_all(dt, res);
      round_all(dt, x);
      round_all(dt, w);
      DevTensor gres(gpu, dt, {s.rows, s.hidden}, res), gx(gpu, dt, {s.rows, s.hidden}, x);
      DevTensor gw(gpu, dt, {s.hidden}, w), gout(gpu, dt, {s.rows, s.hidden});
      gout.poison();
      gpu.add_rms_norm(gres.t(), gx.t(), gw.t(), 1e-6f, gout.t());
      Backend& cpu = cpu_backend();
      DevTensor cres(cpu, DType::kF32, {s.rows, s.hidden}, res), cx(cpu, DType::kF32, {s.rows, s.hidden}, x);
      DevTensor cw(cpu, DType::kF32, {s.hidden}, w), cout(cpu, DType::kF32, {s.rows, s.hidden});
      cpu.add_rms_norm(cres.t(), cx.t(), cw.t(), 1e-6f, cout.t());
      // The residual is the sum rounded once to the dtype.
      std::vector<float> res_ref = cres.download();
      round_all(dt, res_ref);
      expect_equal(gres.download(), res_ref, "add_rms_norm residual");
      expect_close(gout.download(), cout.download(), dt, "add_rms_norm out");
    }
    expect_status_ok(gpu);
  }
}

struct LinearCase {
  int64_t rows, k, n;
  bool bias;
  bool f32_out;
};

void run_linear_case(DType dt, const LinearCase& c) {
  CudaBackend& gpu = *cuda_backend(dt);
  Backend& cpu = cpu_backend();
  std::vector<float> x = uniform(static_cast<size_t>(c.rows * c.k), -1, 1);
  std::vector<float> w = normal(static_cast<size_t>(c.n * c.k), 0.0f, 1.0f / std::sqrt(static_cast<float>(c.k)));
  std::vector<float> b = uniform(static_cast<size_t>(c.n), -1, 1);
  round_all(dt, x);
  round_all(dt, w);
  round_all(dt, b);
  const DType out_dt = c.f32_out ? DType::kF32 : dt;
  DevTensor gx(gpu, dt, {c.rows, c.k}, x), gw(gpu, dt, {c.n, c.k}, w), gb(gpu, dt, {c.n}, b);
  DevTensor gout(gpu, out_dt, {c.rows, c.n});
  gout.poison();
  gpu.linear(gx.t(), gw.t(), c.bias ? gb.t() : Tensor(), gout.t());
  DevTensor cx(cpu, DType::kF32, {c.rows, c.k}, x), cw(cpu, DType::kF32, {c.n, c.k}, w);
  DevTensor cb(cpu, DType::kF32, {c.n}, b), cout(cpu, DType::kF32, {c.rows, c.n});
  cpu.linear(cx.t(), cw.t(), c.bias ? cb.t() : Tensor(), cout.t());
  // f32 output: only the accumulation order differs; 16-bit: one rounding.
  expect_close(gout.download(), cout.download(), dt, "linear", 1.0, c.f32_out ? 0.25 : 1.0);
}

// One row takes the skinny-product kernel (gemv_kernels.h) unless it is
// turned off: every case runs both ways. k % 8 != 0 falls back to cuBLASLt.
TEST(CudaOpsTest, LinearMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const LinearCase cases[] = {
      {1, 64, 96, false, false},     {7, 128, 200, true, false},   {64, 4096, 1024, false, false},
      {3, 896, 4864, true, false},   {5, 64, 512, false, true},    {9, 256, 1000, true, true},
      {1, 4096, 4096, false, false}, {300, 512, 768, true, false}, {2, 40, 37, false, false},
      {1, 576, 49152, false, true},  {1, 14336, 4096, false, false}, {1, 8, 3, true, true},
      {1, 4096, 6144, true, false},  {1, 1032, 33, false, true},   {1, 24, 1, true, false},
      {1, 2048, 257, true, true},    {1, 136, 5000, false, false}, {4, 14336, 4096, false, false}};
  for (DType dt : kHalfTypes) {
    for (bool skinny : {true, false}) {
      cuda_backend(dt)->set_skinny_linear(skinny);
      for (const LinearCase& c : cases) {
        SCOPED_TRACE(name_of(dt) + " rows=" + std::to_string(c.rows) + " k=" + std::to_string(c.k) +
                     " n=" + std::to_string(c.n) + (c.bias ? " bias" : "") +
                     (c.f32_out ? " f32-out" : "") + (skinny ? " skinny" : " cublaslt"));
        run_linear_case(dt, c);
      }
    }
    cuda_backend(dt)->set_skinny_linear(true);
    expect_status_ok(*cuda_backend(dt));
  }
}

// Row counts that share a heuristic bucket reuse its algorithm
// (cublaslt_linear.h): every count from 2 to 70, and a few large ones.
TEST(CudaOpsTest, LinearAcrossRowCountsMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    for (int64_t rows = 2; rows <= 70; ++rows) {
      SCOPED_TRACE(name_of(dt) + " rows=" + std::to_string(rows));
      run_linear_case(dt, {rows, 256, 384, rows % 3 == 0, rows % 5 == 0});
    }
    for (int64_t rows : {1000, 1023, 1024, 1025, 2047, 2100}) {
      SCOPED_TRACE(name_of(dt) + " rows=" + std::to_string(rows));
      run_linear_case(dt, {rows, 512, 1024, false, false});
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

struct HeadShape { int hq, hkv, d; };
const HeadShape kHeadShapes[] = {{4, 2, 64}, {14, 2, 64}, {8, 8, 128}, {16, 8, 256},
                                 {2, 1, 8},  {6, 2, 96},  {4, 4, 80}};

TEST(CudaOpsTest, QkNormMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (HeadShape h : kHeadShapes) {
      SCOPED_TRACE(name_of(dt) + " hq=" + std::to_string(h.hq) + " d=" + std::to_string(h.d));
      const QkvLayout layout{h.hq, h.hkv, h.d};
      const int64_t tokens = 37;
      std::vector<float> qkv = normal(static_cast<size_t>(tokens * layout.row_width()), 0.0f, 2.0f);
      std::vector<float> qw = uniform(static_cast<size_t>(h.d), 0.5f, 1.5f);
      std::vector<float> kw = uniform(static_cast<size_t>(h.d), 0.5f, 1.5f);
      round_all(dt, qkv);
      round_all(dt, qw);
      round_all(dt, kw);
      DevTensor g(gpu, dt, {tokens, layout.row_width()}, qkv);
      DevTensor gq(gpu, dt, {h.d}, qw), gk(gpu, dt, {h.d}, kw);
      gpu.qk_norm(g.t(), layout, gq.t(), gk.t(), 1e-6f);
      Backend& cpu = cpu_backend();
      DevTensor c(cpu, DType::kF32, {tokens, layout.row_width()}, qkv);
      DevTensor cq(cpu, DType::kF32, {h.d}, qw), ck(cpu, DType::kF32, {h.d}, kw);
      cpu.qk_norm(c.t(), layout, cq.t(), ck.t(), 1e-6f);
      expect_close(g.download(), c.download(), dt, "qk_norm");
    }
    expect_status_ok(gpu);
  }
}

// cos_sin [P, D]: cos(p f_i) for i < D/2, then sin(p f_i), f_i = 10000^(-2i/D);
// D is the rotary width (head_dim, or less for a partial rotary embedding).
std::vector<float> rope_table(int64_t positions, int d) {
  std::vector<float> t(static_cast<size_t>(positions * d));
  for (int64_t p = 0; p < positions; ++p) {
    for (int i = 0; i < d / 2; ++i) {
      const double f = std::pow(10000.0, -2.0 * i / d);
      t[static_cast<size_t>(p * d + i)] = static_cast<float>(std::cos(static_cast<double>(p) * f));
      t[static_cast<size_t>(p * d + d / 2 + i)] = static_cast<float>(std::sin(static_cast<double>(p) * f));
    }
  }
  return t;
}

TEST(CudaOpsTest, RopeMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t num_positions = 4096;
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (HeadShape h : kHeadShapes) {
      SCOPED_TRACE(name_of(dt) + " hq=" + std::to_string(h.hq) + " d=" + std::to_string(h.d));
      const QkvLayout layout{h.hq, h.hkv, h.d};
      const int64_t tokens = 29;
      std::vector<float> qkv = normal(static_cast<size_t>(tokens * layout.row_width()), 0.0f, 2.0f);
      round_all(dt, qkv);
      const std::vector<int32_t> pos = uniform_ints(static_cast<size_t>(tokens), 0, num_positions - 1);
      const std::vector<float> table = rope_table(num_positions, h.d);
      DevTensor g(gpu, dt, {tokens, layout.row_width()}, qkv);
      DevTensor gp(gpu, {tokens}, pos), gt(gpu, DType::kF32, {num_positions, h.d}, table);
      gpu.rope(g.t(), layout, gp.t(), gt.t());
      Backend& cpu = cpu_backend();
      DevTensor c(cpu, DType::kF32, {tokens, layout.row_width()}, qkv);
      DevTensor cp(cpu, {tokens}, pos), ct(cpu, DType::kF32, {num_positions, h.d}, table);
      cpu.rope(c.t(), layout, cp.t(), ct.t());
      expect_close(g.download(), c.download(), dt, "rope");
    }
    expect_status_ok(gpu);
  }
}

// A partial rotary embedding: cos_sin [P, R] with R < D (Phi-4-mini: 96 of
// 128) rotates each q / k head's pairs (i, i + R/2), i < R/2, like the CPU
// reference; dims [R, D) and the v heads stay bit-exact, and positions past
// the table leave the token unchanged.
TEST(CudaOpsTest, RopePartialRotaryMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  struct Shape { int hq, hkv, d, r; int64_t tokens; };
  const Shape shapes[] = {{24, 8, 128, 96, 1},  {24, 8, 128, 96, 300}, {8, 8, 128, 64, 29},
                          {4, 2, 64, 32, 37},   {16, 8, 256, 64, 5},   {6, 2, 96, 48, 11},
                          {4, 4, 80, 78, 17},   {2, 1, 8, 2, 40},      {14, 2, 64, 64, 7}};
  const int64_t num_positions = 4096;
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (const Shape& h : shapes) {
      SCOPED_TRACE(name_of(dt) + " hq=" + std::to_string(h.hq) + " d=" + std::to_string(h.d) +
                   " rotary=" + std::to_string(h.r) + " T=" + std::to_string(h.tokens));
      const QkvLayout layout{h.hq, h.hkv, h.d};
      const int64_t width = layout.row_width();
      std::vector<float> qkv = normal(static_cast<size_t>(h.tokens * width), 0.0f, 2.0f);
      round_all(dt, qkv);
      std::vector<int32_t> pos =
          uniform_ints(static_cast<size_t>(h.tokens), 0, num_positions - 1);
      const std::vector<float> table = rope_table(num_positions, h.r);
      Backend& cpu = cpu_backend();
      DevTensor c(cpu, DType::kF32, {h.tokens, width}, qkv);
      DevTensor cp(cpu, {h.tokens}, pos), ct(cpu, DType::kF32, {num_positions, h.r}, table);
      cpu.rope(c.t(), layout, cp.t(), ct.t());
      std::vector<float> want = c.download();
      // Every 7th token past the table: the CUDA kernel leaves it (the CPU asserts in range).
      for (size_t t = 3; t < pos.size(); t += 7) {
        pos[t] = static_cast<int32_t>(num_positions + t);
        std::copy_n(qkv.begin() + static_cast<int64_t>(t) * width, width,
                    want.begin() + static_cast<int64_t>(t) * width);
      }
      DevTensor g(gpu, dt, {h.tokens, width}, qkv);
      DevTensor gp(gpu, {h.tokens}, pos), gt(gpu, DType::kF32, {num_positions, h.r}, table);
      gpu.rope(g.t(), layout, gp.t(), gt.t());
      const std::vector<float> got = g.download();
      expect_close(got, want, dt, "rope");
      for (int64_t t = 0; t < h.tokens; ++t)
        for (int head = 0; head < h.hq + 2 * h.hkv; ++head)
          for (int i = head < h.hq + h.hkv ? h.r : 0; i < h.d; ++i) {
            const size_t at = static_cast<size_t>(t * width + head * h.d + i);
            ASSERT_EQ(got[at], qkv[at]) << "token " << t << " head " << head << " dim " << i;
          }
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaOpsTest, SiluMulMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  struct Shape { int64_t rows, inter; };
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (Shape s : {Shape{1, 64}, Shape{5, 100}, Shape{33, 14336}, Shape{3, 7}}) {
      SCOPED_TRACE(name_of(dt) + " rows=" + std::to_string(s.rows) + " I=" + std::to_string(s.inter));
      std::vector<float> gu = normal(static_cast<size_t>(s.rows * 2 * s.inter), 0.0f, 3.0f);
      round_all(dt, gu);
      DevTensor g(gpu, dt, {s.rows, 2 * s.inter}, gu), gout(gpu, dt, {s.rows, s.inter});
      gout.poison();
      gpu.silu_mul(g.t(), gout.t());
      Backend& cpu = cpu_backend();
      DevTensor c(cpu, DType::kF32, {s.rows, 2 * s.inter}, gu), cout(cpu, DType::kF32, {s.rows, s.inter});
      cpu.silu_mul(c.t(), cout.t());
      expect_close(gout.download(), cout.download(), dt, "silu_mul");
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaOpsTest, GeluTanhMulMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  struct Shape {
    int64_t rows, inter;
  };
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (Shape s : {Shape{1, 64}, Shape{5, 100}, Shape{33, 2048}, Shape{3, 7}}) {
      SCOPED_TRACE(name_of(dt) + " rows=" + std::to_string(s.rows) +
                   " I=" + std::to_string(s.inter));
      std::vector<float> gu = normal(static_cast<size_t>(s.rows * 2 * s.inter), 0.0f, 3.0f);
      round_all(dt, gu);
      DevTensor g(gpu, dt, {s.rows, 2 * s.inter}, gu), gout(gpu, dt, {s.rows, s.inter});
      gout.poison();
      gpu.gelu_tanh_mul(g.t(), gout.t());
      Backend& cpu = cpu_backend();
      DevTensor c(cpu, DType::kF32, {s.rows, 2 * s.inter}, gu),
          cout(cpu, DType::kF32, {s.rows, s.inter});
      cpu.gelu_tanh_mul(c.t(), cout.t());
      expect_close(gout.download(), cout.download(), dt, "gelu_tanh_mul");
    }
    expect_status_ok(gpu);
  }
}

// Gemma's embedding scale (16-bit activations) and final-logit soft-capping
// (f32 logits, and 16-bit).
TEST(CudaOpsTest, ScaleAndSoftcapMatchCpu) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    CudaBackend& gpu = *cuda_backend(dt == DType::kF32 ? DType::kBF16 : dt);
    SCOPED_TRACE(name_of(dt));
    const int64_t rows = 7, cols = 1001;
    std::vector<float> x = normal(static_cast<size_t>(rows * cols), 0.0f, 20.0f);
    if (dt != DType::kF32) round_all(dt, x);
    for (bool cap : {false, true}) {
      DevTensor g(gpu, dt, {rows, cols}, x);
      Backend& cpu = cpu_backend();
      DevTensor c(cpu, DType::kF32, {rows, cols}, x);
      Tensor gt = g.t(), ct = c.t();
      if (cap) {
        gpu.softcap(gt, 30.0f);
        cpu.softcap(ct, 30.0f);
      } else {
        gpu.scale(gt, 25.25f);
        cpu.scale(ct, 25.25f);
      }
      expect_close(g.download(), c.download(), dt, cap ? "softcap" : "scale");
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaOpsTest, KvWriteMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (int block_size : {1, 16, 32, 7}) {
      for (HeadShape h : {HeadShape{4, 2, 64}, HeadShape{8, 8, 128}, HeadShape{2, 1, 8}, HeadShape{3, 1, 12}}) {
        SCOPED_TRACE(name_of(dt) + " block_size=" + std::to_string(block_size) + " d=" + std::to_string(h.d));
        const QkvLayout layout{h.hq, h.hkv, h.d};
        const int64_t tokens = 40, num_blocks = 64;
        const int64_t cache_elems = num_blocks * block_size * h.hkv * h.d;
        std::vector<float> qkv = normal(static_cast<size_t>(tokens * layout.row_width()), 0.0f, 1.0f);
        std::vector<float> k0 = uniform(static_cast<size_t>(cache_elems), -1, 1);
        std::vector<float> v0 = uniform(static_cast<size_t>(cache_elems), -1, 1);
        round_all(dt, qkv);
        round_all(dt, k0);
        round_all(dt, v0);
        // Distinct slots, some tokens skipped with -1.
        std::vector<int32_t> slots(static_cast<size_t>(num_blocks * block_size));
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), rng());
        slots.resize(static_cast<size_t>(tokens));
        for (size_t i = 0; i < slots.size(); i += 5) slots[i] = -1;
        const std::vector<int64_t> cache_shape{num_blocks, block_size, h.hkv, h.d};
        DevTensor g(gpu, dt, {tokens, layout.row_width()}, qkv), gs(gpu, {tokens}, slots);
        DevTensor gk(gpu, dt, cache_shape, k0), gv(gpu, dt, cache_shape, v0);
        KvCacheView gcache{gk.t(), gv.t(), block_size, Tensor()};
        gpu.kv_write(g.t(), layout, gs.t(), gcache);
        Backend& cpu = cpu_backend();
        DevTensor c(cpu, DType::kF32, {tokens, layout.row_width()}, qkv), cs(cpu, {tokens}, slots);
        DevTensor ck(cpu, DType::kF32, cache_shape, k0), cv(cpu, DType::kF32, cache_shape, v0);
        KvCacheView ccache{ck.t(), cv.t(), block_size, Tensor()};
        cpu.kv_write(c.t(), layout, cs.t(), ccache);
        expect_equal(gk.download(), ck.download(), "kv_write k");
        expect_equal(gv.download(), cv.download(), "kv_write v");
      }
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaOpsTest, CopyBlocksMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (int num_pairs : {1, 5, 300}) {  // 300 > one launch's 128 pairs
      SCOPED_TRACE(name_of(dt) + " pairs=" + std::to_string(num_pairs));
      const int64_t num_blocks = 700, block_size = 16, hkv = 2, d = 24;
      const std::vector<int64_t> shape{num_blocks, block_size, hkv, d};
      const size_t n = static_cast<size_t>(num_blocks * block_size * hkv * d);
      std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng());
      const std::vector<int32_t> src(ids.begin(), ids.begin() + num_pairs);
      const std::vector<int32_t> dst(ids.begin() + num_pairs, ids.begin() + 2 * num_pairs);
      std::vector<DevTensor> g_tensors, c_tensors;
      std::vector<std::vector<float>> data;
      for (int layer = 0; layer < 2; ++layer) {
        for (int kv = 0; kv < 2; ++kv) {
          data.push_back(uniform(n, -1, 1));
          round_all(dt, data.back());
          g_tensors.emplace_back(gpu, dt, shape, data.back());
          c_tensors.emplace_back(cpu_backend(), DType::kF32, shape, data.back());
        }
      }
      std::vector<KvCacheView> g_caches, c_caches;
      for (size_t layer = 0; layer < 2; ++layer) {
        g_caches.push_back({g_tensors[2 * layer].t(), g_tensors[2 * layer + 1].t(),
                            static_cast<int>(block_size), Tensor()});
        c_caches.push_back({c_tensors[2 * layer].t(), c_tensors[2 * layer + 1].t(),
                            static_cast<int>(block_size), Tensor()});
      }
      gpu.copy_blocks(g_caches, src, dst);
      cpu_backend().copy_blocks(c_caches, src, dst);
      for (size_t i = 0; i < g_tensors.size(); ++i) {
        expect_equal(g_tensors[i].download(), c_tensors[i].download(), "copy_blocks");
      }
    }
    expect_status_ok(gpu);
  }
}

// A small decode-like sequence of ops, eager vs captured and replayed (with
// new input data copied into the captured input buffer between replays).
TEST(CudaGraphTest, ReplayMatchesEagerExecution) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(name_of(dt));
    CudaBackend& gpu = *cuda_backend(dt);
    const int64_t rows = 4, hidden = 256, inter = 512;
    std::vector<float> w_norm = uniform(hidden, 0.5f, 1.5f), w_up = normal(2 * inter * hidden, 0, 0.06f);
    std::vector<float> w_down = normal(hidden * inter, 0, 0.04f);
    round_all(dt, w_norm);
    round_all(dt, w_up);
    round_all(dt, w_down);
    DevTensor x(gpu, dt, {rows, hidden}), normed(gpu, dt, {rows, hidden});
    DevTensor gate_up(gpu, dt, {rows, 2 * inter}), act(gpu, dt, {rows, inter});
    DevTensor out(gpu, DType::kF32, {rows, hidden});
    DevTensor wn(gpu, dt, {hidden}, w_norm), wu(gpu, dt, {2 * inter, hidden}, w_up);
    DevTensor wd(gpu, dt, {hidden, inter}, w_down);
    auto record = [&] {
      gpu.rms_norm(x.t(), wn.t(), 1e-6f, normed.t());
      gpu.linear(normed.t(), wu.t(), Tensor(), gate_up.t());
      gpu.silu_mul(gate_up.t(), act.t());
      gpu.linear(act.t(), wd.t(), Tensor(), out.t());
    };
    for (int round = 0; round < 2; ++round) {
      std::vector<float> input = normal(rows * hidden, 0, 1);
      x.upload(input);
      out.poison();
      record();
      const std::vector<float> eager = out.download();
      static int graph_ids[2] = {-1, -1};
      int& id = graph_ids[dt == DType::kF16 ? 1 : 0];
      if (id < 0) id = gpu.capture_graph(record);
      ASSERT_GE(id, 0);
      out.poison();
      x.upload(input);
      gpu.replay_graph(id);
      expect_equal(out.download(), eager, "graph replay");
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaBackendTest, BadArgumentsBecomeStatusNotCrash) {
  PAGODA_REQUIRE_GPU();
  std::unique_ptr<Backend> fresh = create_cuda_backend(0, DType::kBF16);
  ASSERT_NE(fresh, nullptr);
  auto& gpu = static_cast<CudaBackend&>(*fresh);
  DevTensor x(gpu, DType::kBF16, {2, 64}), w(gpu, DType::kBF16, {32}), out(gpu, DType::kBF16, {2, 64});
  gpu.rms_norm(x.t(), w.t(), 1e-6f, out.t());  // w has the wrong width
  EXPECT_FALSE(gpu.status().ok());
  gpu.replay_graph(12345);
  gpu.synchronize();
}

}  // namespace
}  // namespace pagoda::gpu_test
