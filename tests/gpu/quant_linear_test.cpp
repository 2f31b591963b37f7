// linear with a block-dtype weight (GGUF quantization blocks) on CUDA against
// the CPU backend on the same blocks, for every format: the decode kernel
// (1..8 rows, quant_gemv.cu) and the dequantize-then-cuBLASLt path (more
// rows, cuda_quant_linear.cpp), over odd N, several K, with and without bias
// and f32 output, on fresh random blocks (random_blocks.h: random quant
// bytes, finite f16 scales over 2^-16..2^-2 with random signs, some zero).
// Then both paths inside a captured CUDA graph against eager execution.
//
// Tolerance: as the dense linear (expect_close for the compute dtype): the
// decode kernel differs from the CPU only in summation order (and the final
// rounding), the cuBLASLt path also in rounding each dequantized weight to
// the compute dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "random_blocks.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

std::string name_of(DType t) {
  return std::string(dtype_name(t));
}

// Block bytes of `t` on a device, prepared for linear().
struct DevBlocks {
  DevBlocks(Backend& backend, DType t, int64_t n, int64_t k, const std::vector<uint8_t>& host)
      : buffer(&backend, host.size()), tensor(buffer.data(), t, {n, k}) {
    backend.copy_to_device(buffer.data(), host.data(), host.size());
    backend.synchronize();
    const Status st = backend.prepare_block_weight(tensor);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  }
  DeviceBuffer buffer;
  Tensor tensor;
};

struct QuantCase {
  int64_t rows, n, k;
  bool bias, f32_out;
};

void run_case(DType dt, DType wt, const QuantCase& c) {
  CudaBackend& gpu = *cuda_backend(dt);
  Backend& cpu = cpu_backend();
  const int64_t num_blocks = c.n * c.k / dtype_block_elems(wt);
  const std::vector<uint8_t> blocks = test::random_blocks(wt, num_blocks, rng());
  std::vector<float> x = uniform(static_cast<size_t>(c.rows * c.k), -1, 1);
  std::vector<float> b = uniform(static_cast<size_t>(c.n), -1, 1);
  round_all(dt, x);
  round_all(dt, b);
  const DType out_dt = c.f32_out ? DType::kF32 : dt;
  DevBlocks gw(gpu, wt, c.n, c.k, blocks);
  DevTensor gx(gpu, dt, {c.rows, c.k}, x), gb(gpu, dt, {c.n}, b);
  DevTensor gout(gpu, out_dt, {c.rows, c.n});
  gout.poison();
  gpu.linear(gx.t(), gw.tensor, c.bias ? gb.t() : Tensor(), gout.t());
  DevBlocks cw(cpu, wt, c.n, c.k, blocks);
  DevTensor cx(cpu, DType::kF32, {c.rows, c.k}, x), cb(cpu, DType::kF32, {c.n}, b);
  DevTensor cout(cpu, DType::kF32, {c.rows, c.n});
  cpu.linear(cx.t(), cw.tensor, c.bias ? cb.t() : Tensor(), cout.t());
  // Up to 8 rows the decode kernel dequantizes in f32 registers: an f32
  // output is held to half the dtype's ulp tolerance. More rows dequantize
  // the weight into the compute dtype first (as --gguf-dequantize does at
  // load), so K-format values that dtype cannot hold (q3_K / q6_K: an int8
  // sub-scale times an f16 scale) are rounded: the dtype's tolerance.
  expect_close(gout.download(), cout.download(), dt, "quant linear", 1.0,
               c.f32_out && c.rows <= 8 ? 0.5 : 1.0);
}

TEST(CudaQuantLinearTest, EveryFormatMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t batches[] = {1, 2, 3, 8, 9, 64, 300};
  // (n, k): odd n, rows not a multiple of the CTA's 4 warps; k 1 or more
  // shared-memory stages of the decode kernel (K formats: 16 blocks = 4096).
  const std::pair<int64_t, int64_t> shapes[] = {{1, 256},    {33, 512}, {257, 1280},
                                                {100, 4096}, {7, 4352}, {515, 768}};
  for (DType dt : kHalfTypes) {
    for (DType wt : test::block_dtypes()) {
      for (int64_t rows : batches) {
        for (size_t s = 0; s < std::size(shapes); ++s) {
          const auto [n, k] = shapes[s];
          const QuantCase c{rows, n, k, (rows + s) % 3 == 0, (rows + s) % 4 == 1};
          SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                       " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       (c.bias ? " bias" : "") + (c.f32_out ? " f32-out" : ""));
          run_case(dt, wt, c);
        }
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// K of one 32-element block and odd multiples (the 32-element formats only:
// K formats need multiples of 256), and a large decode shape per format.
TEST(CudaQuantLinearTest, ShortRowsAndLargeShapes) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    for (DType wt : test::block_dtypes()) {
      const int64_t block = dtype_block_elems(wt);
      for (int64_t k : {block, 3 * block, 5 * block}) {
        for (int64_t rows : {1, 5, 17}) {
          SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows) +
                       " k=" + std::to_string(k));
          run_case(dt, wt, {rows, 45, k, true, false});
        }
      }
      SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " 4096x4096");
      run_case(dt, wt, {1, 4096, 4096, false, false});
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// Both paths captured into a graph and replayed give the eager result.
TEST(CudaQuantLinearTest, GraphReplayMatchesEager) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (DType wt : {DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
      for (int64_t rows : {3, 64}) {
        SCOPED_TRACE(name_of(dt) + " " + name_of(wt) + " rows=" + std::to_string(rows));
        const int64_t n = 300, k = 1024;
        DevBlocks w(gpu, wt, n, k, test::random_blocks(wt, n * k / dtype_block_elems(wt), rng()));
        DevTensor x(gpu, dt, {rows, k}), out(gpu, dt, {rows, n});
        auto record = [&] { gpu.linear(x.t(), w.tensor, Tensor(), out.t()); };
        std::vector<float> input = uniform(static_cast<size_t>(rows * k), -1, 1);
        x.upload(input);
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
    expect_status_ok(gpu);
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
