#include "test_util.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"

namespace pagoda::gpu_test {
namespace {

struct Backends {
  bool probed = false;
  std::unique_ptr<Backend> bf16, f16, cpu;
};

Backends& backends() {
  static Backends b;
  return b;
}

// Releases the backends before CUDA's runtime shuts down at exit.
class BackendEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    backends().bf16.reset();
    backends().f16.reset();
    backends().cpu.reset();
  }
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new BackendEnvironment);

uint64_t initial_seed() {
  const char* env = std::getenv("PAGODA_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::printf("kernel tests: random seed %llu (replay with PAGODA_TEST_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

double eps_of(DType t) { return t == DType::kF16 ? 1.0 / 2048.0 : 1.0 / 256.0; }

}  // namespace

CudaBackend* cuda_backend(DType compute_dtype) {
  Backends& b = backends();
  if (!b.probed) {
    b.probed = true;
    b.bf16 = create_cuda_backend(0, DType::kBF16);
    if (b.bf16 != nullptr) b.f16 = create_cuda_backend(0, DType::kF16);
  }
  Backend* be = compute_dtype == DType::kF16 ? b.f16.get() : b.bf16.get();
  return static_cast<CudaBackend*>(be);
}

bool gpu_required() {
  const char* env = std::getenv("PAGODA_REQUIRE_GPU");
  return env != nullptr && std::string(env) == "1";
}

Backend& cpu_backend() {
  Backends& b = backends();
  if (b.cpu == nullptr) b.cpu = create_cpu_backend();
  return *b.cpu;
}

std::mt19937_64& rng() {
  static std::mt19937_64 gen(initial_seed());
  return gen;
}

std::vector<float> uniform(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng());
  return v;
}

std::vector<float> normal(size_t n, float mean, float stddev) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng());
  return v;
}

std::vector<int32_t> uniform_ints(size_t n, int32_t lo, int32_t hi) {
  std::uniform_int_distribution<int32_t> d(lo, hi);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = d(rng());
  return v;
}

float round_to(DType t, float x) {
  if (t == DType::kBF16) return bf16_to_float(float_to_bf16(x));
  if (t == DType::kF16) return fp16_to_float(float_to_fp16(x));
  return x;
}

void round_all(DType t, std::vector<float>& v) {
  for (float& x : v) x = round_to(t, x);
}

static Tensor make_tensor(void* data, DType dtype, const std::vector<int64_t>& shape) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

static size_t num_elements(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

DevTensor::DevTensor(Backend& backend, DType dtype, std::vector<int64_t> shape)
    : backend_(&backend),
      buffer_(&backend, std::max<size_t>(num_elements(shape) * dtype_size(dtype), 16)),
      tensor_(make_tensor(buffer_.data(), dtype, shape)) {}

DevTensor::DevTensor(Backend& backend, DType dtype, std::vector<int64_t> shape,
                     const std::vector<float>& values)
    : DevTensor(backend, dtype, std::move(shape)) {
  upload(values);
}

DevTensor::DevTensor(Backend& backend, std::vector<int64_t> shape,
                     const std::vector<int32_t>& values)
    : DevTensor(backend, DType::kI32, std::move(shape)) {
  upload_i32(values);
}

void DevTensor::upload(const std::vector<float>& values) {
  const size_t n = static_cast<size_t>(tensor_.numel());
  EXPECT_EQ(values.size(), n);
  if (tensor_.dtype == DType::kF32) {
    backend_->copy_to_device(tensor_.data, values.data(), n * 4);
    backend_->synchronize();
    return;
  }
  std::vector<uint16_t> bits(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = tensor_.dtype == DType::kBF16 ? float_to_bf16(values[i]) : float_to_fp16(values[i]);
  }
  backend_->copy_to_device(tensor_.data, bits.data(), n * 2);
  backend_->synchronize();
}

void DevTensor::upload_i32(const std::vector<int32_t>& values) {
  EXPECT_EQ(values.size(), static_cast<size_t>(tensor_.numel()));
  backend_->copy_to_device(tensor_.data, values.data(), values.size() * 4);
  backend_->synchronize();
}

void DevTensor::upload_bytes(const std::vector<uint8_t>& bytes) {
  EXPECT_EQ(bytes.size(), tensor_.nbytes());
  backend_->copy_to_device(tensor_.data, bytes.data(), bytes.size());
  backend_->synchronize();
}

std::vector<uint8_t> DevTensor::download_bytes() const {
  std::vector<uint8_t> out(tensor_.nbytes());
  backend_->copy_to_host(out.data(), tensor_.data, out.size());
  return out;
}

void DevTensor::poison() {
  const std::vector<uint8_t> ff(tensor_.nbytes(), 0xFF);
  backend_->copy_to_device(tensor_.data, ff.data(), ff.size());
  backend_->synchronize();
}

std::vector<float> DevTensor::download() const {
  const size_t n = static_cast<size_t>(tensor_.numel());
  std::vector<float> out(n);
  if (tensor_.dtype == DType::kF32) {
    backend_->copy_to_host(out.data(), tensor_.data, n * 4);
    return out;
  }
  std::vector<uint16_t> bits(n);
  backend_->copy_to_host(bits.data(), tensor_.data, n * 2);
  for (size_t i = 0; i < n; ++i) {
    out[i] = tensor_.dtype == DType::kBF16 ? bf16_to_float(bits[i]) : fp16_to_float(bits[i]);
  }
  return out;
}

std::vector<int32_t> DevTensor::download_i32() const {
  std::vector<int32_t> out(static_cast<size_t>(tensor_.numel()));
  backend_->copy_to_host(out.data(), tensor_.data, out.size() * 4);
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, DType dtype,
                  const std::string& what, double l2_scale, double ulp_scale) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double diff2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    diff2 += d * d;
    ref2 += static_cast<double>(ref[i]) * ref[i];
  }
  const double rms = ref.empty() ? 0.0 : std::sqrt(ref2 / static_cast<double>(ref.size()));
  const double tol_l2 = (dtype == DType::kF16 ? 2e-3 : 1e-2) * l2_scale;
  const double ulps = 8.0 * ulp_scale * eps_of(dtype);
  size_t num_bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool finite_ref = std::isfinite(ref[i]);
    const bool bad = finite_ref ? !(std::fabs(static_cast<double>(got[i]) - ref[i]) <=
                                    ulps * (std::fabs(ref[i]) + rms))
                                : !(got[i] == ref[i]);
    if (bad && num_bad++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " expected " << ref[i]
                    << " (rms " << rms << ")";
    }
  }
  EXPECT_EQ(num_bad, 0u) << what << ": elements outside tolerance";
  const double rel = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  EXPECT_LT(rel, tol_l2) << what << ": rel-L2 error";
}

void expect_equal(const std::vector<float>& got, const std::vector<float>& ref,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t num_bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool same = got[i] == ref[i] || (std::isnan(got[i]) && std::isnan(ref[i]));
    if (!same && num_bad++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " expected " << ref[i];
    }
  }
  EXPECT_EQ(num_bad, 0u) << what;
}

void expect_replay_matches_eager(CudaBackend& gpu, DevTensor& out,
                                 const std::function<void()>& record) {
  out.poison();
  record();
  const std::vector<float> eager = out.download();
  const int id = gpu.capture_graph(record);
  ASSERT_GE(id, 0);
  out.poison();
  gpu.replay_graph(id);
  expect_equal(out.download(), eager, "graph replay");
}

void expect_status_ok(CudaBackend& gpu) {
  EXPECT_TRUE(gpu.status().ok()) << (gpu.status().ok() ? "" : gpu.status().error().message);
  gpu.clear_status();  // one failure should not fail every later test
}

}  // namespace pagoda::gpu_test
