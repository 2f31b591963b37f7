// linear with an FP8 W8A8 weight (backend/linear_weight.h) on CUDA against
// the CPU backend on the same codes and scales: per-tensor / per-channel
// (every row its scale) and block-wise scales (128, and 16 / 64 / 256),
// dynamic and static activations, with and without bias, bf16 / f16 / f32
// out, through every path of cuda_fp8_linear.cpp: the decode kernels (1..8
// rows, k % 16 == 0; by default the CUDA-core one at 1 row, the tensor-core
// one at 2..8, block 0 or % 64 == 0) and the f32 one (odd k, block 16 at 3+
// rows), cuBLASLt's FP8 GEMM with its own scale modes (> 8 rows, 16 m of
// them, 16-bit out: outer-vector scales for per-row weights, 128x128 blocks
// with k % 512 == 0) and, with that switched off or not applying, with the
// scaling epilogue (per-row scales, k and n multiples of 16), the
// tensor-core FP8 GEMM (> 8 rows: blocks % 128 == 0, per-row scales with
// n % 16 != 0; k tails of 16 columns) and the decode kernel per 8 rows (odd
// k, block 16 / 64); the
// batch-1 decode kernel quantising its own row (and the backend's switch
// between it and the quantise kernel); then a captured graph against eager
// execution. Each decode kernel (tensor-core, CUDA-core rows) is also run
// alone on the quantise kernel's codes, over odd n, k from 64 to 16384, 1..8
// rows (up to the kernel's limit) and several waves of CTAs, against the CPU
// and from a replayed graph; launch_fp8_gemv runs the kernel
// PAGODA_FP8_GEMV's rule names.
//
// Both backends quantise the same 16-bit activations with the same rules,
// so the codes agree exactly; the sums differ in order only (and in the
// tensor cores' accumulation inside each mma). Tolerance: the compute
// dtype's (expect_close), for an f32 output too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/cublaslt_linear.h"
#include "backend/cuda/fp8_linear_kernels.h"
#include "core/fp8.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

enum class Scales { kPerTensor, kPerChannel, kBlock };

struct Fp8Case {
  int64_t rows, n, k;
  Scales scales;
  bool static_act, bias, f32_out;
  int32_t block = 128;  // Scales::kBlock's
};

std::string describe(const Fp8Case& c) {
  const char* s[] = {"per-tensor", "per-channel", "block"};
  return "rows=" + std::to_string(c.rows) + " n=" + std::to_string(c.n) +
         " k=" + std::to_string(c.k) + " " + s[static_cast<int>(c.scales)] +
         (c.static_act ? " static" : " dynamic") + (c.bias ? " bias" : "") +
         (c.f32_out ? " f32-out" : "") +
         (c.scales == Scales::kBlock ? " block=" + std::to_string(c.block) : "");
}

// An FP8 weight (codes, scales, input scale) on one backend, prepared.
struct DevFp8 {
  DevFp8(Backend& be, int64_t n, int64_t k, int32_t block, const std::vector<uint8_t>& codes,
         const std::vector<float>& scales, const std::vector<float>& input_scale)
      : codes_buf(&be, codes.size()), scale_buf(&be, scales.size() * 4), input_buf(&be, 4) {
    be.copy_to_device(codes_buf.data(), codes.data(), codes.size());
    be.copy_to_device(scale_buf.data(), scales.data(), scales.size() * 4);
    w = LinearWeight(Tensor(codes_buf.data(), DType::kF8E4M3, {n, k}));
    w.block = block;
    w.weight_scale = block > 0 ? Tensor(scale_buf.data(), DType::kF32,
                                        {(n + block - 1) / block, (k + block - 1) / block})
                               : Tensor(scale_buf.data(), DType::kF32, {n});
    if (!input_scale.empty()) {
      be.copy_to_device(input_buf.data(), input_scale.data(), 4);
      w.input_scale = Tensor(input_buf.data(), DType::kF32, {1});
    }
    be.synchronize();
    const Status st = be.prepare_fp8_weight(w);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  }
  DeviceBuffer codes_buf, scale_buf, input_buf;
  LinearWeight w;
};

std::vector<uint8_t> random_codes(size_t n) {
  std::vector<uint8_t> v(n);
  std::uniform_int_distribution<int> d(0, 255);
  for (uint8_t& b : v) {
    b = static_cast<uint8_t>(d(rng()));
    if ((b & 0x7f) == 0x7f) b ^= 1;  // no NaN
  }
  return v;
}

// mode: where non-null, the cuBLASLt scale mode the GPU's call was routed to.
void run_case(DType dt, const Fp8Case& c, cuda::Fp8Scales* mode = nullptr) {
  CudaBackend& gpu = *cuda_backend(dt);
  Backend& cpu = cpu_backend();
  const int32_t block = c.scales == Scales::kBlock ? c.block : 0;
  const std::vector<uint8_t> codes = random_codes(static_cast<size_t>(c.n * c.k));
  const int64_t num_scales =
      block > 0 ? ((c.n + block - 1) / block) * ((c.k + block - 1) / block) : c.n;
  std::vector<float> scales = uniform(static_cast<size_t>(num_scales), 1e-4f, 4e-3f);
  if (c.scales == Scales::kPerTensor) std::fill(scales.begin(), scales.end(), scales[0]);
  std::vector<float> x = uniform(static_cast<size_t>(c.rows * c.k), -2, 2);
  std::vector<float> b = uniform(static_cast<size_t>(c.n), -1, 1);
  round_all(dt, x);
  round_all(dt, b);
  // Static: a scale that saturates the largest activations a little.
  const std::vector<float> input_scale =
      c.static_act ? std::vector<float>{1.5f / 448.0f} : std::vector<float>{};
  const DType out_dt = c.f32_out ? DType::kF32 : dt;
  DevFp8 gw(gpu, c.n, c.k, block, codes, scales, input_scale);
  DevTensor gx(gpu, dt, {c.rows, c.k}, x), gb(gpu, dt, {c.n}, b);
  DevTensor gout(gpu, out_dt, {c.rows, c.n});
  gout.poison();
  gpu.linear(gx.t(), gw.w, c.bias ? gb.t() : Tensor(), gout.t());
  if (mode != nullptr) *mode = gpu.fp8_lt_mode(gw.w, c.rows, c.bias ? gb.t() : Tensor(), out_dt);
  DevFp8 cw(cpu, c.n, c.k, block, codes, scales, input_scale);
  DevTensor cx(cpu, DType::kF32, {c.rows, c.k}, x), cb(cpu, DType::kF32, {c.n}, b);
  DevTensor cout(cpu, DType::kF32, {c.rows, c.n});
  cpu.linear(cx.t(), cw.w, c.bias ? cb.t() : Tensor(), cout.t());
  // f32 output is held to the input dtype's tolerance too: the products run
  // on tensor cores (cuBLASLt's e4m3 GEMM, the mma kernels), whose
  // accumulation on Hopper is not exact f32 (an H200 run saw 2 of 409,600
  // f32 outputs of cuBLASLt 0.002 x rms off at f16 rows=100 n=4096 k=512,
  // past half the f16 tolerance).
  expect_close(gout.download(), cout.download(), dt, "fp8 linear", 1.0, 1.0);
}

TEST(CudaFp8LinearTest, EveryScaleLayoutMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t batches[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 64, 100, 333, 512};
  // (n, k): multiples of 16 and of 128 (cuBLASLt for > 8 rows), odd n (the
  // FP8 GEMM with per-row scales), odd k (the f32 decode kernel's byte
  // path), k % 128 == 16 (the tensor-core kernels' tails), k of one and
  // several 512-column sweeps.
  const std::pair<int64_t, int64_t> shapes[] = {{64, 256}, {4096, 512}, {33, 512}, {257, 1280},
                                                {96, 100}, {130, 4096}, {200, 400}};
  for (DType dt : kHalfTypes) {
    for (int64_t rows : batches) {
      for (size_t s = 0; s < std::size(shapes); ++s) {
        for (Scales sc : {Scales::kPerTensor, Scales::kPerChannel, Scales::kBlock}) {
          const auto [n, k] = shapes[s];
          const bool static_act = sc != Scales::kBlock && (rows + s) % 2 == 0;
          const Fp8Case c{rows, n, k, sc, static_act, (rows + s) % 3 == 0, (rows + s) % 4 == 1};
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + describe(c));
          run_case(dt, c);
        }
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// cuBLASLt's own scale modes above 8 rows, with the switch on and off
// (PAGODA_FP8_LT_SCALES): per-tensor / per-channel weights (outer-vector
// scales) and 128x128 blocks (1x128 activation groups), bias or none, bf16 /
// f16 out (f32 out and row counts that are not multiples of 16 keep the
// other paths), T 9 .. 4096 (4112 x 512 at 4096:
// two chunks, a partial block row), against the CPU; each shape's routing
// (fp8_lt_mode), and no refusal by cuBLASLt of a shape routed to it (a
// refusal falls back correctly, but then the new path is not what ran).
TEST(CudaFp8LinearTest, LtScaleModesMatchCpu) {
  PAGODA_REQUIRE_GPU();
  struct Shape {
    int64_t n, k;
    bool outer_vec, block;  // the shape takes cuBLASLt's outer-vector / block scales
  };
  const Shape shapes[] = {{320, 1024, true, true},  {4112, 512, true, true},
                          {200, 512, false, false}, {96, 1280, true, false},
                          {48, 400, true, false},   {4096, 4096, true, true}};
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (bool on : {true, false}) {
      gpu.set_fp8_lt_scales(on);
      const int64_t refusals = gpu.num_fp8_lt_refusals();
      for (int64_t rows : {8, 9, 16, 17, 64, 100, 512, 4096}) {
        for (size_t s = 0; s < std::size(shapes); ++s) {
          const Shape& sh = shapes[s];
          if (rows == 4096 && (dt != DType::kBF16 || (sh.n != 320 && sh.n != 4112))) continue;
          if (sh.n * sh.k > 4096 * 1024 && rows > 64) continue;
          for (Scales sc : {Scales::kPerTensor, Scales::kPerChannel, Scales::kBlock}) {
            const bool static_act = sc == Scales::kPerChannel && rows % 2 == 1;
            const Fp8Case c{rows, sh.n, sh.k, sc, static_act, (rows + s) % 2 == 0,
                            rows == 17 && s % 2 == 0};
            SCOPED_TRACE(std::string(dtype_name(dt)) + (on ? " lt-scales " : " old ") +
                         describe(c));
            cuda::Fp8Scales mode = cuda::Fp8Scales::kNone;
            run_case(dt, c, &mode);
            cuda::Fp8Scales want = cuda::Fp8Scales::kNone;
            if (on && rows > cuda::kFp8GemvMaxRows && rows % 16 == 0 && !c.f32_out) {
              if (sc == Scales::kBlock && sh.block) want = cuda::Fp8Scales::kBlock128;
              if (sc != Scales::kBlock && sh.outer_vec) want = cuda::Fp8Scales::kOuterVec;
            }
            EXPECT_EQ(static_cast<int>(mode), static_cast<int>(want)) << "routing";
          }
        }
      }
      EXPECT_EQ(gpu.num_fp8_lt_refusals(), refusals)
          << "cuBLASLt refused shapes routed to its scale modes (the fallback ran; the log "
             "names the first)";
    }
    gpu.set_fp8_lt_scales(true);
    expect_status_ok(gpu);
  }
}

// Blocks other than 128: 16 (the f32 decode kernel, per 8 rows above 8), 64
// (the tensor-core decode kernel, per 8 rows above 8), 256 (both tensor-core
// kernels: two GEMM steps per group).
TEST(CudaFp8LinearTest, OtherBlockSizesMatchCpu) {
  PAGODA_REQUIRE_GPU();
  const std::pair<int64_t, int64_t> shapes[] = {{320, 768}, {200, 400}, {48, 1040}};
  for (DType dt : kHalfTypes) {
    for (int32_t block : {16, 64, 256}) {
      for (int64_t rows : {1, 5, 8, 9, 64, 333}) {
        for (size_t s = 0; s < std::size(shapes); ++s) {
          const auto [n, k] = shapes[s];
          Fp8Case c{rows, n, k, Scales::kBlock, false, (rows + s) % 2 == 0, (rows + s) % 3 == 1};
          c.block = block;
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + describe(c));
          run_case(dt, c);
        }
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// Batch-1 decode: the tensor-core kernel quantising its own 16-bit row gives
// the bits of launch_fp8_quantize followed by the same kernel
// (launch_fp8_gemv_tc) on the codes
// (the same codes and scales, the same sums): per-row scales (dynamic and
// static) and blocks of 64 and 128, k with a 16-column tail. A row longer
// than kFp8GemvFusedMaxK takes the quantise kernel instead (against the CPU).
TEST(CudaFp8LinearTest, OwnQuantisationMatchesQuantiseKernel) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (int32_t block : {0, 64, 128}) {
      for (bool static_act : {false, true}) {
        if (block > 0 && static_act) continue;
        SCOPED_TRACE(std::string(dtype_name(dt)) + " block " + std::to_string(block) +
                     (static_act ? " static" : " dynamic"));
        const int64_t n = 200, k = 1040;
        const int64_t groups = block > 0 ? (k + block - 1) / block : 1;
        const int64_t num_scales = block > 0 ? ((n + block - 1) / block) * groups : n;
        DevFp8 w(gpu, n, k, block, random_codes(static_cast<size_t>(n * k)),
                 uniform(static_cast<size_t>(num_scales), 1e-4f, 4e-3f),
                 static_act ? std::vector<float>{1.5f / 448.0f} : std::vector<float>{});
        DevTensor x(gpu, dt, {1, k}, uniform(static_cast<size_t>(k), -2, 2));
        DevTensor own(gpu, dt, {1, n}), split(gpu, dt, {1, n});
        DeviceBuffer codes(&gpu, static_cast<size_t>(k)), scales(&gpu, groups * 4);
        const float* input_scale = static_act ? w.w.input_scale.ptr<float>() : nullptr;
        cuda::Fp8QuantizeParams q;
        q.dtype = dt;
        q.x = x.t().data;
        q.rows = 1;
        q.k = k;
        q.group = block;
        q.input_scale = input_scale;
        q.codes = static_cast<uint8_t*>(codes.data());
        q.scales = static_cast<float*>(scales.data());
        cuda::Fp8LinearParams g;
        g.x_codes = q.codes;
        g.x_scales = q.scales;
        g.w = static_cast<const uint8_t*>(w.w.data);
        g.w_scales = w.w.weight_scale.ptr<float>();
        g.block = block;
        g.out = split.t().data;
        g.out_dtype = dt;
        g.rows = 1;
        g.n = n;
        g.k = k;
        own.poison();
        split.poison();
        ASSERT_EQ(cuda::launch_fp8_quantize(q, gpu.stream()), cudaSuccess);
        ASSERT_EQ(cuda::launch_fp8_gemv_tc(g, gpu.stream()), cudaSuccess);
        g.x = x.t().data;
        g.x_dtype = dt;
        g.input_scale = input_scale;
        g.out = own.t().data;
        ASSERT_TRUE(cuda::fp8_gemv_tc_supports(g));
        ASSERT_EQ(cuda::launch_fp8_gemv(g, gpu.stream()), cudaSuccess);
        gpu.synchronize();
        expect_equal(own.download(), split.download(), "own quantisation vs quantise kernel");
      }
    }
    for (Scales sc : {Scales::kPerChannel, Scales::kBlock}) {
      const Fp8Case c{1, 24, cuda::kFp8GemvFusedMaxK + 16, sc, false, true, false};
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + describe(c));
      run_case(dt, c);
    }
    expect_status_ok(gpu);
  }
}

// Batch-1 linear through CudaBackend: the kernel quantising its own row
// (set_fp8_own_row(true)) and the quantise kernel first (the default) give
// the same codes, hence bit-equal outputs where the codes then take the same
// tensor-core kernel (PAGODA_FP8_GEMV=tc; else the default decode kernel sums
// in another order: the dtype's tolerance), on products of one and of several
// waves of CTAs.
TEST(CudaFp8LinearTest, OwnRowSwitchGivesTheSameResult) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const int64_t one_wave = int64_t{32} * gpu.num_sms(), k = 1040;
  for (int64_t n : {int64_t{200}, one_wave + 40}) {
    for (int32_t block : {0, 128}) {
      SCOPED_TRACE("n " + std::to_string(n) + " block " + std::to_string(block));
      const int64_t num_scales = block > 0 ? ((n + block - 1) / block) * ((k + block - 1) / block) : n;
      DevFp8 w(gpu, n, k, block, random_codes(static_cast<size_t>(n * k)),
               uniform(static_cast<size_t>(num_scales), 1e-4f, 4e-3f), {});
      DevTensor x(gpu, DType::kBF16, {1, k}, uniform(static_cast<size_t>(k), -2, 2));
      std::vector<std::vector<float>> outs;
      for (bool own : {false, true}) {
        gpu.set_fp8_own_row(own);
        DevTensor out(gpu, DType::kBF16, {1, n});
        out.poison();
        gpu.linear(x.t(), w.w, Tensor(), out.t());
        gpu.synchronize();
        outs.push_back(out.download());
      }
      gpu.set_fp8_own_row(false);
      if (cuda::fp8_gemv_variant() == cuda::Fp8GemvVariant::kTc) {
        expect_equal(outs[1], outs[0], "own row vs quantise kernel");
      } else {
        expect_close(outs[1], outs[0], DType::kBF16, "own row vs quantise kernel", 1.0, 1.0);
      }
    }
  }
  expect_status_ok(gpu);
}

// The 8B model's decode and prefill shapes (large k and n).
TEST(CudaFp8LinearTest, LargeShapes) {
  PAGODA_REQUIRE_GPU();
  for (int64_t rows : {1, 2, 4, 8, 64, 512}) {
    for (Scales sc : {Scales::kPerChannel, Scales::kBlock}) {
      const Fp8Case c{rows, 4096, 14336, sc, false, false, false};
      SCOPED_TRACE(describe(c));
      run_case(DType::kBF16, c);
    }
  }
  expect_status_ok(*cuda_backend(DType::kBF16));
}

// One decode kernel alone (fp8_linear_kernels.h), for A/B and its tests.
struct DecodeVariant {
  const char* name;
  bool (*supports)(const cuda::Fp8LinearParams&);
  cudaError_t (*launch)(const cuda::Fp8LinearParams&, cudaStream_t);
  int max_rows;
};

const DecodeVariant kDecodeVariants[] = {
    {"tc", cuda::fp8_gemv_tc_supports, cuda::launch_fp8_gemv_tc, cuda::kFp8GemvMaxRows},
    {"rows", cuda::fp8_gemv_rows_supports, cuda::launch_fp8_gemv_rows, cuda::kFp8GemvRowsMaxRows},
};

// launch_fp8_gemv itself, which picks one of the above (or the f32 kernel).
const DecodeVariant kRoutedDecode = {"launch_fp8_gemv", cuda::fp8_gemv_supports,
                                     cuda::launch_fp8_gemv, cuda::kFp8GemvMaxRows};

// The kernel launch_fp8_gemv must run on g under fp8_gemv_variant()
// (fp8_linear_kernels.h), or null for the f32 kernel: with "tc" the
// tensor-core kernel wherever it applies; by default the rows kernel for
// exactly one row, else the tensor-core kernel, else rows; with "rows" the
// rows kernel up to kFp8GemvRowsMaxRows rows, else the tensor-core kernel.
const DecodeVariant* expected_route(const cuda::Fp8LinearParams& g) {
  const DecodeVariant& tc = kDecodeVariants[0];
  const DecodeVariant& rows = kDecodeVariants[1];
  const bool tc_ok = tc.supports(g), rows_ok = rows.supports(g);
  switch (cuda::fp8_gemv_variant()) {
    case cuda::Fp8GemvVariant::kTc:
      return tc_ok ? &tc : nullptr;
    case cuda::Fp8GemvVariant::kRows:
      return rows_ok ? &rows : tc_ok ? &tc : nullptr;
    case cuda::Fp8GemvVariant::kAuto:
      if (g.rows == 1 && rows_ok) return &rows;
      return tc_ok ? &tc : rows_ok ? &rows : nullptr;
  }
  return nullptr;
}

// v on the codes of launch_fp8_quantize (the CPU's codes) against the CPU's
// linear; then, with `graph`, the launch captured and replayed against the
// eager result; with `route` (v is kRoutedDecode), the kernel
// expected_route names run alone on the same codes gives the same bytes.
void run_decode_variant(DType dt, const DecodeVariant& v, const Fp8Case& c, bool graph,
                        bool route = false) {
  CudaBackend& gpu = *cuda_backend(dt);
  Backend& cpu = cpu_backend();
  const int32_t block = c.scales == Scales::kBlock ? c.block : 0;
  const int64_t groups = block > 0 ? (c.k + block - 1) / block : 1;
  const std::vector<uint8_t> codes = random_codes(static_cast<size_t>(c.n * c.k));
  const int64_t num_scales = block > 0 ? ((c.n + block - 1) / block) * groups : c.n;
  const std::vector<float> scales = uniform(static_cast<size_t>(num_scales), 1e-4f, 4e-3f);
  std::vector<float> x = uniform(static_cast<size_t>(c.rows * c.k), -2, 2);
  std::vector<float> b = uniform(static_cast<size_t>(c.n), -1, 1);
  round_all(dt, x);
  round_all(dt, b);
  const DType out_dt = c.f32_out ? DType::kF32 : dt;
  DevFp8 gw(gpu, c.n, c.k, block, codes, scales, {});
  DevTensor gx(gpu, dt, {c.rows, c.k}, x), gb(gpu, dt, {c.n}, b);
  DevTensor gout(gpu, out_dt, {c.rows, c.n});
  DeviceBuffer q_codes(&gpu, static_cast<size_t>(c.rows * c.k)),
      q_scales(&gpu, static_cast<size_t>(c.rows * groups) * 4);
  cuda::Fp8QuantizeParams q;
  q.dtype = dt;
  q.x = gx.t().data;
  q.rows = c.rows;
  q.k = c.k;
  q.group = block;
  q.codes = static_cast<uint8_t*>(q_codes.data());
  q.scales = static_cast<float*>(q_scales.data());
  cuda::Fp8LinearParams g;
  g.x_codes = q.codes;
  g.x_scales = q.scales;
  g.w = static_cast<const uint8_t*>(gw.w.data);
  g.w_scales = gw.w.weight_scale.ptr<float>();
  g.block = block;
  g.bias = c.bias ? gb.t().data : nullptr;
  g.bias_dtype = dt;
  g.out = gout.t().data;
  g.out_dtype = out_dt;
  g.rows = static_cast<int>(c.rows);
  g.n = c.n;
  g.k = c.k;
  ASSERT_TRUE(v.supports(g));
  ASSERT_EQ(cuda::launch_fp8_quantize(q, gpu.stream()), cudaSuccess);
  gout.poison();
  ASSERT_EQ(v.launch(g, gpu.stream()), cudaSuccess);
  gpu.synchronize();
  const std::vector<float> eager = gout.download();
  DevFp8 cw(cpu, c.n, c.k, block, codes, scales, {});
  DevTensor cx(cpu, DType::kF32, {c.rows, c.k}, x), cb(cpu, DType::kF32, {c.n}, b);
  DevTensor cout(cpu, DType::kF32, {c.rows, c.n});
  cpu.linear(cx.t(), cw.w, c.bias ? cb.t() : Tensor(), cout.t());
  expect_close(eager, cout.download(), dt, "fp8 decode kernel", 1.0, 1.0);
  if (const DecodeVariant* want = route ? expected_route(g) : nullptr; want != nullptr) {
    SCOPED_TRACE(std::string("expected route ") + want->name);
    gout.poison();
    ASSERT_EQ(want->launch(g, gpu.stream()), cudaSuccess);
    gpu.synchronize();
    expect_equal(gout.download(), eager, "launch_fp8_gemv vs the kernel it should pick");
  }
  if (!graph) return;
  const int id = gpu.capture_graph([&] {
    if (v.launch(g, gpu.stream()) != cudaSuccess) ADD_FAILURE() << "launch in capture";
  });
  ASSERT_GE(id, 0);
  gout.poison();
  gpu.replay_graph(id);
  expect_equal(gout.download(), eager, "graph replay");
}

// Every decode kernel alone against the CPU: n not a multiple of 16 (and
// below one tile), k from 64 to 16384 (k % 64 == 16 and 48: a warp's last
// 64 columns part out of range; k % 512 != 0: a warp load of the rows
// kernel part out of range), n of several waves of CTAs (9000 rows: 563
// tensor-core CTAs, over 2 per SM on 132 SMs), per-row scales and blocks 64
// / 128 / 256 (and 16 for the rows kernel), bias, bf16 / f16 / f32 out;
// every shape at 1..8 rows (up to the kernel's own limit). The first case
// of each kernel and dtype also replays from a graph.
TEST(CudaFp8LinearTest, EveryDecodeKernelMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const std::pair<int64_t, int64_t> shapes[] = {{1, 64},     {15, 80},   {17, 1040}, {200, 400},
                                                {130, 4096}, {40, 16384}, {9000, 80}, {4500, 1040},
                                                {333, 5120}};
  const int32_t blocks[] = {0, 64, 128, 256, 16};
  for (DType dt : kHalfTypes) {
    for (const DecodeVariant& v : kDecodeVariants) {
      bool graph = true;
      for (size_t s = 0; s < std::size(shapes); ++s) {
        for (int64_t rows = 1; rows <= v.max_rows; ++rows) {
          for (size_t bi = 0; bi < std::size(blocks); ++bi) {
            const int32_t block = blocks[bi];
            // Block 16: the rows kernel's alone (the others take multiples of 64).
            if (block == 16 && v.max_rows > cuda::kFp8GemvRowsMaxRows) continue;
            // The large shapes at 1, 2 and 8 rows only (CPU time).
            const auto [n, k] = shapes[s];
            if (n * k > 1000000 && rows != 1 && rows != 2 && rows != 8) continue;
            Fp8Case c{rows, n, k, block > 0 ? Scales::kBlock : Scales::kPerChannel, false,
                      (rows + s + bi) % 2 == 0, (rows + s + bi) % 3 == 1};
            if (block > 0) c.block = block;
            SCOPED_TRACE(std::string(v.name) + " " + std::string(dtype_name(dt)) + " " + describe(c));
            run_decode_variant(dt, v, c, graph);
            graph = false;
          }
        }
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// launch_fp8_gemv runs the kernel PAGODA_FP8_GEMV's rule names (bit-equal
// to that kernel alone; f32 out, where the kernels' summation orders show)
// at every T, per-row scales and blocks 128 and 16 (rows kernel or f32
// kernel only), and matches the CPU. Run the binary once per value of
// PAGODA_FP8_GEMV (unset, tc, rows) to cover each rule.
TEST(CudaFp8LinearTest, DecodeRoutingFollowsPagodaFp8Gemv) {
  PAGODA_REQUIRE_GPU();
  for (int64_t rows = 1; rows <= cuda::kFp8GemvMaxRows; ++rows) {
    for (int32_t block : {0, 128, 16}) {
      Fp8Case c{rows, 200, 1040, block > 0 ? Scales::kBlock : Scales::kPerChannel, false, true,
                true};
      if (block > 0) c.block = block;
      SCOPED_TRACE(describe(c));
      run_decode_variant(DType::kBF16, kRoutedDecode, c, false, true);
    }
  }
  expect_status_ok(*cuda_backend(DType::kBF16));
}

// Every path captured into a graph and replayed gives the eager result.
TEST(CudaFp8LinearTest, GraphReplayMatchesEager) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    // n 200 with per-row scales: the FP8 GEMM (cuBLASLt takes n 320); with
    // lt-scales on, n 320 runs cuBLASLt's own scale modes (per-row and block
    // 128) above 8 rows, off the unscaled GEMM + epilogue / pagoda's FP8 GEMM.
    for (const bool lt_scales : {true, false})
    for (const auto& [n, block] : {std::pair<int64_t, int32_t>{320, 0}, {200, 0}, {320, 128}}) {
      gpu.set_fp8_lt_scales(lt_scales);
      // rows 0: one row with the decode kernel quantising its own row
      // (set_fp8_own_row(true)); 1: the quantise kernel first (the default).
      for (int64_t case_rows : {0, 1, 3, 8, 64}) {
        const int64_t rows = std::max<int64_t>(case_rows, 1);
        gpu.set_fp8_own_row(case_rows == 0);
        SCOPED_TRACE(std::string(dtype_name(dt)) + (lt_scales ? " lt-scales" : " old") +
                     " n " + std::to_string(n) + " block " +
                     std::to_string(block) + " rows=" + std::to_string(rows) +
                     (case_rows == 0 ? " own row" : ""));
        const int64_t k = 1024;
        const int64_t num_scales = block > 0 ? 3 * 8 : n;
        DevFp8 w(gpu, n, k, block, random_codes(static_cast<size_t>(n * k)),
                 uniform(static_cast<size_t>(num_scales), 1e-4f, 4e-3f), {});
        DevTensor x(gpu, dt, {rows, k}), out(gpu, dt, {rows, n});
        auto record = [&] { gpu.linear(x.t(), w.w, Tensor(), out.t()); };
        x.upload(uniform(static_cast<size_t>(rows * k), -1, 1));
        out.poison();
        record();
        const std::vector<float> eager = out.download();
        const int id = gpu.capture_graph(record);
        ASSERT_GE(id, 0);
        out.poison();
        gpu.replay_graph(id);
        expect_equal(out.download(), eager, "graph replay");
      }
    }
    gpu.set_fp8_own_row(false);
    gpu.set_fp8_lt_scales(true);
    expect_status_ok(gpu);
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
