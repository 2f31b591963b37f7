// Helpers of the GPU kernel tests: shared backends (CUDA bf16, CUDA f16, the
// CPU reference), random data, device tensors with poisoning, and
// dtype-scaled comparisons.
//
// Method: inputs are drawn fresh (seed printed; PAGODA_TEST_SEED replays),
// rounded to the CUDA compute dtype, and the same rounded values, widened to
// f32, feed the CPU backend. CUDA outputs are poisoned (all bytes 0xFF, a NaN
// in f32 / bf16 / f16) before each op so unwritten elements fail.
//
// Tolerances (expect_close): no NaN/inf where the reference is finite;
//   rel-L2 = |got - ref|_2 / |ref|_2 < kRelL2 (bf16 1e-2, f16 2e-3) * l2_scale;
//   every element |got - ref| <= ulps * eps(dtype) * (|ref| + rms(ref)) with
//   eps = 2^-8 (bf16) or 2^-11 (f16) and ulps = 8 * ulp_scale.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

namespace pagoda::gpu_test {

// nullptr when the machine has no usable GPU.
CudaBackend* cuda_backend(DType compute_dtype);
Backend& cpu_backend();

// Skips the test without a GPU, or fails it when the environment sets
// PAGODA_REQUIRE_GPU=1 (run.sh does: on the GPU machine a skip is a failure).
bool gpu_required();
#define PAGODA_REQUIRE_GPU()                                             \
  do {                                                                   \
    if (::pagoda::gpu_test::cuda_backend(DType::kBF16) == nullptr) {     \
      if (::pagoda::gpu_test::gpu_required()) FAIL() << "no CUDA backend"; \
      GTEST_SKIP() << "no CUDA device";                                  \
    }                                                                    \
  } while (0)

// The dtypes every op is tested in.
inline const DType kHalfTypes[] = {DType::kBF16, DType::kF16};

std::mt19937_64& rng();
std::vector<float> uniform(size_t n, float lo, float hi);
std::vector<float> normal(size_t n, float mean, float stddev);
std::vector<int32_t> uniform_ints(size_t n, int32_t lo, int32_t hi);  // inclusive
float round_to(DType t, float x);
void round_all(DType t, std::vector<float>& v);

// A tensor in device memory of one backend; values cross as f32 vectors.
class DevTensor {
 public:
  DevTensor(Backend& backend, DType dtype, std::vector<int64_t> shape);
  DevTensor(Backend& backend, DType dtype, std::vector<int64_t> shape,
            const std::vector<float>& values);
  DevTensor(Backend& backend, std::vector<int64_t> shape, const std::vector<int32_t>& values);

  Tensor& t() { return tensor_; }
  const Tensor& t() const { return tensor_; }
  // Writes values converted (round-to-nearest-even) to the tensor's dtype.
  void upload(const std::vector<float>& values);
  void upload_i32(const std::vector<int32_t>& values);
  // The tensor's bytes as they are (an FP8 tensor's e4m3 codes).
  void upload_bytes(const std::vector<uint8_t>& bytes);
  std::vector<uint8_t> download_bytes() const;
  void poison();  // every byte 0xFF
  std::vector<float> download() const;
  std::vector<int32_t> download_i32() const;

 private:
  Backend* backend_;
  DeviceBuffer buffer_;
  Tensor tensor_;
};

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, DType dtype,
                  const std::string& what, double l2_scale = 1.0, double ulp_scale = 1.0);
void expect_equal(const std::vector<float>& got, const std::vector<float>& ref,
                  const std::string& what);

// Runs record() eagerly, then captures it into a graph and replays it, out
// poisoned before each run: the replay must leave out bit-equal to eager.
void expect_replay_matches_eager(CudaBackend& gpu, DevTensor& out,
                                 const std::function<void()>& record);

// Asserts that the CUDA backend recorded no error.
void expect_status_ok(CudaBackend& gpu);

}  // namespace pagoda::gpu_test
