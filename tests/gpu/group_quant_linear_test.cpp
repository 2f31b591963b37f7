// linear with an AWQ / GPTQ group-format weight (core/dtype.h: w4g32 ..
// w8g128, and the _perm formats of GPTQ act order) on CUDA against the CPU
// backend on the same bytes: the decode kernel (T 1..8, quant_mma_gemv.cu;
// a _perm format gathers x through the permutation), the wide kernel (T 16,
// launch_quant_mma_wide, x gathered likewise) and the dequantize-then-
// cuBLASLt path (T 100, 333; the dequantization scatters the columns
// back to logical order), N and K odd multiples of the group, 4 and 8 bits,
// with and without the permutation, random zero points over [0, 2^bits]
// (symmetric checkpoints store 2^(bits-1), asymmetric any; GPTQ v1's + 1
// reaches 2^bits) and f16 scales with random signs. Then both paths inside a
// captured CUDA graph against eager execution.
//
// Tolerance: as quant_linear_test.cpp (the compute dtype's; f32 output of
// the decode kernel at half of it).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "random_blocks.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

struct Weight {
  Weight(Backend& backend, DType t, int64_t n, int64_t k, const std::vector<uint8_t>& host)
      : buffer(&backend, host.size()), tensor(buffer.data(), t, {n, k}) {
    backend.copy_to_device(buffer.data(), host.data(), host.size());
    backend.synchronize();
    const Status st = backend.prepare_block_weight(tensor);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  }
  DeviceBuffer buffer;
  Tensor tensor;
};

void run_case(DType dt, DType wt, int64_t rows, int64_t n, int64_t k, bool bias, bool f32_out) {
  CudaBackend& gpu = *cuda_backend(dt);
  Backend& cpu = cpu_backend();
  const std::vector<uint8_t> bytes = test::random_weight(wt, n, k, rng());
  std::vector<float> x = uniform(static_cast<size_t>(rows * k), -1, 1);
  std::vector<float> b = uniform(static_cast<size_t>(n), -1, 1);
  round_all(dt, x);
  round_all(dt, b);
  const DType out_dt = f32_out ? DType::kF32 : dt;
  Weight gw(gpu, wt, n, k, bytes);
  DevTensor gx(gpu, dt, {rows, k}, x), gb(gpu, dt, {n}, b);
  DevTensor gout(gpu, out_dt, {rows, n});
  gout.poison();
  gpu.linear(gx.t(), gw.tensor, bias ? gb.t() : Tensor(), gout.t());
  Weight cw(cpu, wt, n, k, bytes);
  DevTensor cx(cpu, DType::kF32, {rows, k}, x), cb(cpu, DType::kF32, {n}, b);
  DevTensor cout(cpu, DType::kF32, {rows, n});
  cpu.linear(cx.t(), cw.tensor, bias ? cb.t() : Tensor(), cout.t());
  expect_close(gout.download(), cout.download(), dt, "group quant linear", 1.0,
               f32_out && rows <= 8 ? 0.5 : 1.0);
}

std::vector<DType> group_formats() {
  std::vector<DType> all;
  for (DType t : test::block_dtypes())
    if (is_group_dtype(t)) all.push_back(t);
  for (DType t : test::k_perm_dtypes()) all.push_back(t);
  return all;
}

TEST(CudaGroupQuantLinearTest, EveryFormatMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t batches[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 100, 333};
  for (DType dt : kHalfTypes) {
    for (DType wt : group_formats()) {
      const int64_t g = dtype_block_elems(wt);
      // (n, k) in groups: odd multiples, one decode stage and several.
      const std::pair<int64_t, int64_t> shapes[] = {
          {1, 1}, {3 * g + 1, 3}, {77, 5}, {129, 33}, {515, 9}};
      for (int64_t rows : batches) {
        for (size_t s = 0; s < std::size(shapes); ++s) {
          const int64_t n = shapes[s].first, k = shapes[s].second * g;
          const bool bias = (rows + s) % 3 == 0, f32_out = (rows + s) % 4 == 1;
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::string(dtype_name(wt)) +
                       " rows=" + std::to_string(rows) + " n=" + std::to_string(n) + " k=" +
                       std::to_string(k) + (bias ? " bias" : "") + (f32_out ? " f32-out" : ""));
          run_case(dt, wt, rows, n, k, bias, f32_out);
        }
      }
    }
    expect_status_ok(*cuda_backend(dt));
  }
}

// The Llama-3.1-8B shapes at T 1 (decode kernel) and 64 (wide kernel).
TEST(CudaGroupQuantLinearTest, LargeShapes) {
  PAGODA_REQUIRE_GPU();
  for (DType wt : {DType::kW4G128, DType::kW4G128Perm, DType::kW8G128}) {
    for (int64_t rows : {1, 64}) {
      SCOPED_TRACE(std::string(dtype_name(wt)) + " rows=" + std::to_string(rows));
      run_case(DType::kBF16, wt, rows, 4096, 14336, false, false);
      run_case(DType::kBF16, wt, rows, 6144, 4096, true, false);
    }
  }
  expect_status_ok(*cuda_backend(DType::kBF16));
}

TEST(CudaGroupQuantLinearTest, GraphReplayMatchesEager) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  for (DType wt : {DType::kW4G128, DType::kW4G32Perm, DType::kW8G64Perm}) {
    for (int64_t rows : {3, 100}) {
      SCOPED_TRACE(std::string(dtype_name(wt)) + " rows=" + std::to_string(rows));
      const int64_t n = 300, k = 1024;
      Weight w(gpu, wt, n, k, test::random_weight(wt, n, k, rng()));
      DevTensor x(gpu, DType::kBF16, {rows, k}), out(gpu, DType::kBF16, {rows, n});
      auto record = [&] { gpu.linear(x.t(), w.tensor, Tensor(), out.t()); };
      x.upload(uniform(static_cast<size_t>(rows * k), -1, 1));
      expect_replay_matches_eager(gpu, out, record);
    }
  }
  expect_status_ok(gpu);
}

}  // namespace
}  // namespace pagoda::gpu_test
