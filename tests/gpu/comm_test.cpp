// Tests of the NCCL communicators (backend/cuda/nccl_communicator.h) on every
// GPU of the machine, one thread per rank as the engine drives them.
//
// Method: every rank fills its tensor with fresh random values (seed printed;
// PAGODA_TEST_SEED replays), the ranks all-reduce concurrently, and each
// result is compared with a host f32 sum over the ranks in rank order:
//  - one-shot path: bitwise equal to that sum rounded once to the dtype (the
//    kernel accumulates in f32 in rank order too);
//  - NCCL: |got - ref| <= size * eps(dtype) * sum_r |x_r| + 1e-6, eps = 2^-8
//    (bf16), 2^-11 (f16), 2^-23 (f32), as NCCL accumulates in the dtype in
//    its own order;
// and every rank's result must be bitwise equal to rank 0's. The paths are
// forced with NcclCommunicatorOptions::oneshot_max_bytes (0: NCCL only;
// kMaxOneShotBytes: one-shot for every size tested) and also run at the
// default threshold; the one-shot path runs on both protocols
// (NcclCommunicatorOptions::oneshot_protocol: push + Lamport, which takes
// messages up to oneshot_push_capacity and the barrier protocol above, and
// barrier alone). Needs at least 2 GPUs: with fewer, the tests that need
// them are skipped with a message saying so.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/cuda/nccl_library.h"
#include "backend/fused_norm_route.h"
#include "core/half.h"
#include "finishes_within.h"

namespace pagoda {
namespace {

int gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  return count;
}

#define REQUIRE_TWO_GPUS()                                                                     \
  do {                                                                                         \
    if (gpu_count() < 2) GTEST_SKIP() << "SKIP: needs at least 2 CUDA GPUs, found " << gpu_count(); \
  } while (0)

uint64_t seed() {
  static const uint64_t s = [] {
    const char* env = std::getenv("PAGODA_TEST_SEED");
    const uint64_t v = env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("comm_test seed %llu (PAGODA_TEST_SEED replays)\n", static_cast<unsigned long long>(v));
    return v;
  }();
  return s;
}

// A group over the first `count` GPUs (every GPU by default): one backend
// per GPU (bf16 compute; the communicators do not care) and its
// communicators. Torn down in the order nccl_communicator.h asks: backends
// (and their graphs) first.
class Ranks {
 public:
  // fused_norm_max_rows: every fitting message takes the fused kernel unless
  // a test asks for the engine's routing (-1).
  explicit Ranks(int64_t oneshot_max_bytes,
                 std::optional<cuda::OneShotProtocol> protocol = std::nullopt,
                 int count = gpu_count(), int64_t fused_norm_max_rows = kMaxFusedNormRows) {
    for (int d = 0; d < count; ++d) {
      owned_.push_back(create_cuda_backend(d, DType::kBF16));
      if (owned_.back() == nullptr) {
        ADD_FAILURE() << "no CUDA backend on device " << d;
        return;
      }
      gpus.push_back(static_cast<CudaBackend*>(owned_.back().get()));
    }
    NcclCommunicatorOptions options;
    options.oneshot_max_bytes = oneshot_max_bytes;
    options.oneshot_protocol = protocol;
    options.fused_norm_max_rows = fused_norm_max_rows;
    auto created = create_nccl_communicators(gpus, options);
    if (!created.ok()) {
      ADD_FAILURE() << "create_nccl_communicators: " << created.error().message;
      return;
    }
    comms = std::move(created).value();
  }
  ~Ranks() {
    owned_.clear();
    comms.clear();
  }
  bool ok() const { return !comms.empty() && comms.size() == gpus.size(); }
  int size() const { return static_cast<int>(gpus.size()); }
  CudaBackend& gpu(int r) const { return *gpus[static_cast<size_t>(r)]; }
  Communicator& comm(int r) const { return *comms[static_cast<size_t>(r)]; }

  // Runs fn(rank) on one thread per rank with the rank's device current.
  void on_ranks(const std::function<void(int)>& fn) const {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        gpus[static_cast<size_t>(r)]->make_current();
        fn(r);
      });
    }
    for (std::thread& t : threads) t.join();
  }

  // Every communicator's and backend's status is ok.
  ::testing::AssertionResult healthy() const {
    for (int r = 0; r < size(); ++r) {
      if (!comm(r).status().ok()) {
        return ::testing::AssertionFailure() << "rank " << r << ": " << comm(r).status().error().message;
      }
      if (!gpu(r).status().ok()) {
        return ::testing::AssertionFailure() << "backend " << r << ": " << gpu(r).status().error().message;
      }
    }
    return ::testing::AssertionSuccess();
  }

  std::vector<CudaBackend*> gpus;
  std::vector<std::unique_ptr<Communicator>> comms;

 private:
  std::vector<std::unique_ptr<Backend>> owned_;
};

float eps_of(DType t) {
  return t == DType::kBF16 ? 1.0f / 256 : t == DType::kF16 ? 1.0f / 2048 : 1.0f / 8388608;
}

uint16_t to_half_bits(DType t, float v) { return t == DType::kBF16 ? float_to_bf16(v) : float_to_fp16(v); }
float from_half_bits(DType t, uint16_t b) { return t == DType::kBF16 ? bf16_to_float(b) : fp16_to_float(b); }

// Host values in a dtype's bytes, and back.
std::vector<uint8_t> encode(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t b = to_half_bits(t, v[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}
// The value of the dtype's bytes at p.
float decode_at(DType t, const uint8_t* p) {
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, p, 2);
  return from_half_bits(t, b);
}
float decode(DType t, const std::vector<uint8_t>& bytes, size_t i) {
  return decode_at(t, bytes.data() + i * dtype_size(t));
}

// Per-rank device memory of `bytes` (+ 16 for misaligned views).
// Destroy before the Ranks.
struct RankBuffers {
  RankBuffers(const Ranks& ranks, size_t bytes) : gpus(ranks.gpus), ptrs(gpus.size(), nullptr) {
    for (size_t r = 0; r < ptrs.size(); ++r) {
      gpus[r]->make_current();
      ptrs[r] = gpus[r]->allocate(bytes + 16);
      EXPECT_NE(ptrs[r], nullptr) << "allocate " << bytes << " bytes on rank " << r;
    }
  }
  ~RankBuffers() {
    for (size_t r = 0; r < ptrs.size(); ++r) {
      gpus[r]->make_current();
      gpus[r]->deallocate(ptrs[r]);
    }
  }
  std::vector<CudaBackend*> gpus;
  std::vector<void*> ptrs;
};

// One all-reduce case's data: each rank's random input (dtype-rounded) and
// the expected sum, plus each rank's result once downloaded.
struct Case {
  Case(int ranks, DType t, int64_t n, uint64_t salt) : dtype(t), numel(n) {
    std::mt19937_64 gen(seed() ^ (salt * 0x9e3779b97f4a7c15ull));
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    inputs.resize(static_cast<size_t>(ranks));
    results.resize(static_cast<size_t>(ranks));
    for (auto& in : inputs) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = d(gen);
      in = encode(t, v);
    }
  }
  // Checks every rank's result; `exact`: bitwise equal to the f32 rank-order
  // sum rounded to the dtype.
  void check(bool exact, const std::string& what) const {
    const int ranks = static_cast<int>(inputs.size());
    int bad = 0;
    for (int64_t i = 0; i < numel && bad < 5; ++i) {
      float sum = 0.0f, abs_sum = 0.0f;
      for (const auto& in : inputs) {
        const float x = decode(dtype, in, static_cast<size_t>(i));
        sum += x;
        abs_sum += std::fabs(x);
      }
      const float got = decode(dtype, results[0], static_cast<size_t>(i));
      const float ref = exact ? decode(dtype, encode(dtype, {sum}), 0) : sum;
      const float tol = exact ? 0.0f : ranks * eps_of(dtype) * abs_sum + 1e-6f;
      if (!(std::fabs(got - ref) <= tol)) {
        ADD_FAILURE() << what << ": element " << i << " = " << got << ", expected " << ref
                      << " (tolerance " << tol << ")";
        ++bad;
      }
    }
    for (int r = 1; r < ranks; ++r) {
      EXPECT_EQ(std::memcmp(results[0].data(), results[static_cast<size_t>(r)].data(), results[0].size()), 0)
          << what << ": rank " << r << "'s result differs bitwise from rank 0's";
    }
  }
  DType dtype;
  int64_t numel;
  std::vector<std::vector<uint8_t>> inputs, results;
};

const DType kTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// Element counts from 1 to 64 MiB of the dtype: odd sizes, vector edges, the
// one-shot default threshold's neighbourhood in a group of `ranks`.
std::vector<int64_t> sizes_for(DType t, int ranks) {
  const int64_t es = static_cast<int64_t>(dtype_size(t));
  const int64_t limit = default_oneshot_max_bytes(ranks);
  const auto push = static_cast<int64_t>(cuda::kOneShotPushMaxBytes);
  std::vector<int64_t> v = {1, 2, 3, 7, 8, 9, 31, 127, 1000, 4095, 4096, 4097, 12345, 65537};
  for (int64_t bytes : {push - 16, push, push + 16, limit - 16, limit, limit + 16, int64_t{3} << 20,
                        int64_t{64} << 20}) {
    v.push_back(bytes / es);
  }
  v.push_back((int64_t{5} << 20) / es + 3);
  return v;
}

struct PathCase {
  const char* name;
  int64_t oneshot_max_bytes;                      // NcclCommunicatorOptions
  std::optional<cuda::OneShotProtocol> protocol;  // NcclCommunicatorOptions
};
constexpr auto kPush = cuda::OneShotProtocol::kPush;
constexpr auto kBarrier = cuda::OneShotProtocol::kBarrier;
// nccl, the two one-shot protocols for every size, the defaults.
const PathCase kPaths[] = {{"nccl", 0, std::nullopt},
                           {"one-shot push", kMaxOneShotBytes, kPush},
                           {"one-shot barrier", kMaxOneShotBytes, kBarrier},
                           {"default", -1, std::nullopt}};

bool expect_exact(const PathCase& path, size_t bytes, int ranks) {
  const int64_t limit =
      path.oneshot_max_bytes < 0 ? default_oneshot_max_bytes(ranks) : path.oneshot_max_bytes;
  return static_cast<int64_t>(bytes) <= limit;
}

TEST(NcclLibraryTest, MissingLibrarySaysWhatToInstall) {
  auto lib = cuda::open_nccl_library("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(lib.ok());
  const std::string& m = lib.error().message;
  EXPECT_NE(m.find("/nonexistent/libnccl.so.2"), std::string::npos) << m;
  EXPECT_NE(m.find("pip install nvidia-nccl-cu13"), std::string::npos) << m;
  EXPECT_NE(m.find("PAGODA_NCCL_LIBRARY"), std::string::npos) << m;
  EXPECT_NE(m.find("LD_LIBRARY_PATH"), std::string::npos) << m;
}

TEST(NcclLibraryTest, LibraryWithoutNcclSymbolsIsRefused) {
  auto lib = cuda::open_nccl_library("libc.so.6");
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.error().message.find("lacks ncclGetVersion"), std::string::npos) << lib.error().message;
}

TEST(NcclLibraryTest, LoadsAndReportsVersion) {
  auto lib = cuda::load_nccl();
  ASSERT_TRUE(lib.ok()) << lib.error().message;
  EXPECT_GE((*lib)->version, 20700);
  std::printf("NCCL %s from %s\n", (*lib)->version_name.c_str(), (*lib)->path.c_str());
}

TEST(OneShotThresholdTest, EnvironmentOverridesDefault) {
  NcclCommunicatorOptions options;
  unsetenv(kOneShotMaxBytesEnv);
  EXPECT_EQ(*resolve_oneshot_max_bytes(options, 2), int64_t{4} << 20);
  EXPECT_EQ(*resolve_oneshot_max_bytes(options, 4), int64_t{512} << 10);
  EXPECT_EQ(*resolve_oneshot_max_bytes(options, 8), int64_t{256} << 10);
  setenv(kOneShotMaxBytesEnv, "256KiB", 1);
  EXPECT_EQ(*resolve_oneshot_max_bytes(options, 2), 256 * 1024);
  setenv(kOneShotMaxBytesEnv, "0", 1);
  EXPECT_EQ(*resolve_oneshot_max_bytes(options, 2), 0);
  options.oneshot_max_bytes = 1000;  // an explicit option wins over the environment
  EXPECT_EQ(*resolve_oneshot_max_bytes(options, 2), 1000);
  options.oneshot_max_bytes = -1;
  for (const char* bad : {"lots", "-5", "1GiB"}) {
    setenv(kOneShotMaxBytesEnv, bad, 1);
    auto r = resolve_oneshot_max_bytes(options, 2);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find(kOneShotMaxBytesEnv), std::string::npos) << r.error().message;
  }
  unsetenv(kOneShotMaxBytesEnv);
}

// The routing threshold reaches the group (its name reports it), and a bad
// $PAGODA_FUSED_NORM_MAX_ROWS fails the group's creation (the decision
// itself: tests/unit/parallel/fused_norm_route_test.cpp).
TEST(FusedNormRouteTest, GroupTakesThresholdFromEnvironment) {
  REQUIRE_TWO_GPUS();
  unsetenv(kFusedNormMaxRowsEnv);
  {
    Ranks ranks(kMaxOneShotBytes, kPush, 2, -1);
    ASSERT_TRUE(ranks.ok());
    EXPECT_NE(ranks.comm(0).name().find(
                  "up to " + std::to_string(kDefaultFusedNormMaxRows) + " rows"),
              std::string::npos)
        << ranks.comm(0).name();
  }
  setenv(kFusedNormMaxRowsEnv, "24", 1);
  {
    Ranks ranks(kMaxOneShotBytes, kPush, 2, -1);
    ASSERT_TRUE(ranks.ok());
    EXPECT_NE(ranks.comm(1).name().find("up to 24 rows"), std::string::npos)
        << ranks.comm(1).name();
  }
  setenv(kFusedNormMaxRowsEnv, "many", 1);
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<CudaBackend*> gpus;
  for (int d = 0; d < 2; ++d) {
    owned.push_back(create_cuda_backend(d, DType::kBF16));
    ASSERT_NE(owned.back(), nullptr);
    gpus.push_back(static_cast<CudaBackend*>(owned.back().get()));
  }
  auto created = create_nccl_communicators(gpus);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().message.find("PAGODA_FUSED_NORM_MAX_ROWS=many"), std::string::npos)
      << created.error().message;
  unsetenv(kFusedNormMaxRowsEnv);
}

TEST(OneShotProtocolTest, EnvironmentPicksProtocol) {
  NcclCommunicatorOptions options;
  unsetenv(kOneShotProtocolEnv);
  EXPECT_EQ(*resolve_oneshot_protocol(options), kPush);
  setenv(kOneShotProtocolEnv, "barrier", 1);
  EXPECT_EQ(*resolve_oneshot_protocol(options), kBarrier);
  setenv(kOneShotProtocolEnv, "push", 1);
  EXPECT_EQ(*resolve_oneshot_protocol(options), kPush);
  options.oneshot_protocol = kBarrier;  // an explicit option wins over the environment
  EXPECT_EQ(*resolve_oneshot_protocol(options), kBarrier);
  options.oneshot_protocol.reset();
  setenv(kOneShotProtocolEnv, "lamport", 1);
  auto r = resolve_oneshot_protocol(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("PAGODA_ONESHOT=lamport"), std::string::npos) << r.error().message;
  unsetenv(kOneShotProtocolEnv);
  EXPECT_EQ(cuda::oneshot_push_capacity(4096), 4096u);
  EXPECT_EQ(cuda::oneshot_push_capacity(size_t{4} << 20), cuda::kOneShotPushMaxBytes);
}

TEST(NcclCommunicatorTest, AllReduceMatchesHostSumOnEveryRank) {
  REQUIRE_TWO_GPUS();
  uint64_t salt = 1;
  for (const PathCase& path : kPaths) {
    Ranks ranks(path.oneshot_max_bytes, path.protocol);
    ASSERT_TRUE(ranks.ok());
    const int n = ranks.size();
    std::printf("%s: %s\n", path.name, ranks.comm(0).name().c_str());
    RankBuffers buf(ranks, size_t{64} << 20);
    for (DType t : kTypes) {
      for (int64_t numel : sizes_for(t, n)) {
        for (bool misaligned : {false, true}) {
          if (misaligned && numel > 100000) continue;
          Case c(n, t, numel, salt++);
          ranks.on_ranks([&](int r) {
            const auto ri = static_cast<size_t>(r);
            CudaBackend& gpu = ranks.gpu(r);
            // Misaligned case: odd ranks' tensors start one element past 16 bytes.
            char* base = static_cast<char*>(buf.ptrs[ri]);
            Tensor x(base + (misaligned && r % 2 == 1 ? dtype_size(t) : 0), t, {numel});
            gpu.copy_to_device(x.data, c.inputs[ri].data(), x.nbytes());
            ranks.comm(r).all_reduce_sum(x);
            c.results[ri].resize(x.nbytes());
            gpu.copy_to_host(c.results[ri].data(), x.data, x.nbytes());
          });
          const std::string what = std::string(path.name) + " " + std::string(dtype_name(t)) +
                                   " n=" + std::to_string(numel) + (misaligned ? " misaligned" : "");
          ASSERT_TRUE(ranks.healthy()) << what;
          c.check(expect_exact(path, static_cast<size_t>(numel) * dtype_size(t), n), what);
        }
      }
    }
  }
}

// Two all-reduces captured in one CUDA graph per rank, replayed with new data
// each time (the one-shot kernel's epochs advance on the device).
TEST(NcclCommunicatorTest, AllReduceInsideCudaGraphReplays) {
  REQUIRE_TWO_GPUS();
  constexpr int kReplays = 5;
  uint64_t salt = 1000;
  for (const PathCase& path : kPaths) {
    Ranks ranks(path.oneshot_max_bytes, path.protocol);
    ASSERT_TRUE(ranks.ok());
    const int n = ranks.size();
    for (DType t : kTypes) {
      for (int64_t numel : {int64_t{1}, int64_t{4097}, int64_t{100003}, (int64_t{4} << 20) + 1}) {
        const size_t bytes = static_cast<size_t>(numel) * dtype_size(t);
        RankBuffers a(ranks, bytes), b(ranks, bytes);
        std::vector<int> graphs(static_cast<size_t>(n), -1);
        // Pinned staging: copies inside the graph re-read it at each replay.
        std::vector<void*> host_in(static_cast<size_t>(n));
        for (int replay = -1; replay < kReplays; ++replay) {
          // replay -1: eager run (NCCL connects on a size's first use), then capture.
          Case ca(n, t, numel, salt++), cb(n, t, numel, salt++);
          ranks.on_ranks([&](int r) {
            const auto ri = static_cast<size_t>(r);
            CudaBackend& gpu = ranks.gpu(r);
            Communicator& comm = ranks.comm(r);
            Tensor xa(a.ptrs[ri], t, {numel}), xb(b.ptrs[ri], t, {numel});
            if (host_in[ri] == nullptr) host_in[ri] = gpu.allocate_host(2 * bytes);
            std::memcpy(host_in[ri], ca.inputs[ri].data(), bytes);
            std::memcpy(static_cast<char*>(host_in[ri]) + bytes, cb.inputs[ri].data(), bytes);
            auto step = [&] {
              gpu.copy_to_device(xa.data, host_in[ri], bytes);
              gpu.copy_to_device(xb.data, static_cast<char*>(host_in[ri]) + bytes, bytes);
              comm.all_reduce_sum(xa);
              comm.all_reduce_sum(xb);
            };
            if (replay < 0) {
              step();
              gpu.synchronize();
              graphs[ri] = gpu.capture_graph(step);
              return;
            }
            // Every rank replays (a rank that skipped would leave the others waiting).
            gpu.replay_graph(graphs[ri]);
            ca.results[ri].resize(bytes);
            cb.results[ri].resize(bytes);
            gpu.copy_to_host(ca.results[ri].data(), xa.data, bytes);
            gpu.copy_to_host(cb.results[ri].data(), xb.data, bytes);
          });
          const std::string what = std::string(path.name) + " graph " + std::string(dtype_name(t)) +
                                   " n=" + std::to_string(numel) + " replay " + std::to_string(replay);
          for (int g : graphs) ASSERT_GE(g, 0) << what << ": capture failed";
          ASSERT_TRUE(ranks.healthy()) << what;
          if (replay >= 0) {
            ca.check(expect_exact(path, bytes, n), what + " (first)");
            cb.check(expect_exact(path, bytes, n), what + " (second)");
          }
        }
        for (int r = 0; r < n; ++r) ranks.gpu(r).deallocate_host(host_in[static_cast<size_t>(r)]);
      }
    }
  }
}

// Each rank sends its tensor to the next rank and receives the previous
// one's (even ranks send first, odd ranks receive first), eagerly and from a
// replayed graph; the bytes must arrive unchanged.
TEST(NcclCommunicatorTest, SendRecvRing) {
  REQUIRE_TWO_GPUS();
  Ranks ranks(-1);
  ASSERT_TRUE(ranks.ok());
  const int n = ranks.size();
  uint64_t salt = 5000;
  for (int64_t numel : {int64_t{1}, int64_t{4097}, int64_t{8} << 20}) {
    const DType t = DType::kBF16;
    const size_t bytes = static_cast<size_t>(numel) * 2;
    RankBuffers out(ranks, bytes), in(ranks, bytes);
    std::vector<int> graphs(static_cast<size_t>(n), -1);
    for (int round = 0; round < 3; ++round) {  // 0: eager, then capture; 1, 2: graph replays
      Case c(n, t, numel, salt++);
      std::vector<std::vector<uint8_t>> got(static_cast<size_t>(n), std::vector<uint8_t>(bytes));
      ranks.on_ranks([&](int r) {
        const auto ri = static_cast<size_t>(r);
        CudaBackend& gpu = ranks.gpu(r);
        Communicator& comm = ranks.comm(r);
        Tensor x(out.ptrs[ri], t, {numel}), y(in.ptrs[ri], t, {numel});
        gpu.copy_to_device(x.data, c.inputs[ri].data(), bytes);
        gpu.synchronize();
        const int next = (r + 1) % n, prev = (r + n - 1) % n;
        auto step = [&] {
          if (r % 2 == 0) {
            comm.send(x, next);
            comm.recv(y, prev);
          } else {
            comm.recv(y, prev);
            comm.send(x, next);
          }
        };
        if (round == 0) {
          step();
          gpu.synchronize();
          graphs[ri] = gpu.capture_graph(step);
        } else {
          gpu.replay_graph(graphs[ri]);
        }
        gpu.copy_to_host(got[ri].data(), y.data, bytes);
      });
      for (int g : graphs) ASSERT_GE(g, 0) << "capture failed";
      ASSERT_TRUE(ranks.healthy()) << "n=" << numel << " round " << round;
      for (int r = 0; r < n; ++r) {
        const int prev = (r + n - 1) % n;
        EXPECT_TRUE(got[static_cast<size_t>(r)] == c.inputs[static_cast<size_t>(prev)])
            << "rank " << r << " did not receive what rank " << prev << " sent (n=" << numel
            << ", round " << round << ")";
      }
    }
  }
}

TEST(NcclCommunicatorTest, BadArgumentsAreKeptInStatus) {
  REQUIRE_TWO_GPUS();
  Ranks ranks(-1);
  ASSERT_TRUE(ranks.ok());
  RankBuffers buf(ranks, 64);
  Tensor t(buf.ptrs[0], DType::kI32, {16});
  ranks.comm(0).all_reduce_sum(t);  // returns at once: nothing is enqueued
  ASSERT_FALSE(ranks.comm(0).status().ok());
  EXPECT_NE(ranks.comm(0).status().error().message.find("dtype i32"), std::string::npos)
      << ranks.comm(0).status().error().message;
  Tensor u(buf.ptrs[1], DType::kBF16, {16});
  ranks.comm(1).send(u, 1);  // to itself
  ASSERT_FALSE(ranks.comm(1).status().ok());
  EXPECT_NE(ranks.comm(1).status().error().message.find("peer 1"), std::string::npos)
      << ranks.comm(1).status().error().message;
}

TEST(NcclCommunicatorTest, SameGpuTwiceIsRefused) {
  REQUIRE_TWO_GPUS();
  std::unique_ptr<Backend> gpu = create_cuda_backend(0, DType::kBF16);
  ASSERT_NE(gpu, nullptr);
  auto* cuda = static_cast<CudaBackend*>(gpu.get());
  auto comms = create_nccl_communicators({cuda, cuda});
  ASSERT_FALSE(comms.ok());
  EXPECT_NE(comms.error().message.find("appears twice"), std::string::npos) << comms.error().message;
}

// Rank 0 enters an all-reduce that no other rank joins (a peer failed); the
// group's abort from another thread must end its kernel: the one-shot path's
// waits (both protocols) and NCCL's (threshold 0). Every rank's status then
// names the abort.
TEST(NcclCommunicatorTest, AbortEndsAnAllReduceThatNoPeerJoins) {
  REQUIRE_TWO_GPUS();
  for (const PathCase& path : {kPaths[0], kPaths[1], kPaths[2]}) {
    SCOPED_TRACE(path.name);
    auto ranks = std::make_shared<Ranks>(path.oneshot_max_bytes, path.protocol);
    ASSERT_TRUE(ranks->ok());
    auto buf = std::make_shared<RankBuffers>(*ranks, 1024);
    EXPECT_TRUE(test::finishes_within(std::chrono::seconds(60), [ranks, buf] {
      // Started first: NCCL may wait for the peer on the host already.
      std::thread aborter([ranks] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ranks->comm(1).abort("rank 1 failed: out of memory");
      });
      ranks->gpu(0).make_current();
      Tensor t(buf->ptrs[0], DType::kBF16, {256});
      ranks->comm(0).all_reduce_sum(t);
      ranks->gpu(0).synchronize();  // returns once the kernel gave up
      aborter.join();
      for (int r = 0; r < ranks->size(); ++r) {
        ASSERT_FALSE(ranks->comm(r).status().ok());
        EXPECT_EQ(ranks->comm(r).status().error().message, "aborted: rank 1 failed: out of memory");
      }
      ranks->comm(0).all_reduce_sum(t);  // does nothing now
      ranks->gpu(0).synchronize();
    }));
  }
}

// ---- stress: many back-to-back all-reduces, skewed ranks ----------------------
//
// kStressOps all-reduces back to back on one stream per rank, each of its own
// dtype, size (1 element to twice the push stages' limit, most of them small)
// and place in a per-rank buffer (some one element past 16-byte alignment),
// with inputs full of -0.0 (the push protocol's sentinel, which a writer
// must send as +0.0), +0.0, whole messages of -0.0 on every rank, and in f32
// the bits 0x80008000 (a pair of 16-bit sentinels; a negative denormal).
// Now and then a host function sleeping 0.1-2 ms holds up one rank's stream
// (in the graph too, as a host node), so one rank runs that far ahead of
// the other. Run eagerly, then captured in one graph per rank and replayed
// with new data, on both one-shot protocols; every result must be bitwise
// the host's f32 rank-order sum rounded to the dtype, on every rank.

constexpr int kStressOps = 2000;

struct StressOp {
  DType dtype;
  int64_t numel;
  size_t offset;  // bytes into the rank's buffer
};

// The ops' shapes (the same on every rank) and the buffer bytes they need.
std::vector<StressOp> stress_plan(uint64_t salt, size_t* total) {
  std::mt19937_64 gen(seed() ^ (salt * 0x9e3779b97f4a7c15ull));
  const auto push = static_cast<int64_t>(cuda::kOneShotPushMaxBytes);
  std::vector<StressOp> ops;
  size_t at = 0;
  for (int i = 0; i < kStressOps; ++i) {
    const DType t = kTypes[gen() % 3];
    const auto es = static_cast<int64_t>(dtype_size(t));
    const uint64_t kind = gen() % 1000;
    int64_t n = 0;
    if (kind < 600) {
      n = 1 + static_cast<int64_t>(gen() % 64);
    } else if (kind < 850) {
      n = 65 + static_cast<int64_t>(gen() % 5000);
    } else if (kind < 980) {
      n = (gen() % 2 == 0 ? 8192 : 4096) / es * 2;  // decoder-sized
    } else if (kind < 995) {
      n = push / es - 8 + static_cast<int64_t>(gen() % 17);  // around the push limit
    } else {
      n = 2 * push / es + 1;  // the barrier protocol in a push group
    }
    const size_t offset = at + (gen() % 8 == 0 ? static_cast<size_t>(es) : 0);
    ops.push_back({t, n, offset});
    at = (offset + static_cast<size_t>(n * es) + 255) / 256 * 256;
  }
  *total = at;
  return ops;
}

// Every rank's inputs for the plan: bytes of the whole buffer.
std::vector<std::vector<uint8_t>> stress_inputs(const std::vector<StressOp>& ops, int ranks,
                                                size_t total, uint64_t salt) {
  std::mt19937_64 gen(seed() ^ (salt * 0x9e3779b97f4a7c15ull));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<std::vector<uint8_t>> in(static_cast<size_t>(ranks), std::vector<uint8_t>(total));
  for (const StressOp& op : ops) {
    const bool all_negative_zero = gen() % 50 == 0;
    for (auto& bytes : in) {
      std::vector<float> v(static_cast<size_t>(op.numel));
      for (float& x : v) {
        const uint64_t k = gen() % 16;
        if (all_negative_zero || k < 2) {
          x = -0.0f;
        } else if (k == 2) {
          x = 0.0f;
        } else if (k == 3 && op.dtype == DType::kF32) {
          const uint32_t bits = 0x80008000u;
          std::memcpy(&x, &bits, 4);
        } else {
          x = d(gen);
        }
      }
      const std::vector<uint8_t> e = encode(op.dtype, v);
      std::memcpy(bytes.data() + op.offset, e.data(), e.size());
    }
  }
  return in;
}

// Checks every op's result on rank 0 against the host sum (bitwise), and
// every rank's buffer against rank 0's.
void check_stress(const std::vector<StressOp>& ops, const std::vector<std::vector<uint8_t>>& in,
                  const std::vector<std::vector<uint8_t>>& out, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < ops.size() && bad < 5; ++i) {
    const StressOp& op = ops[i];
    const size_t es = dtype_size(op.dtype);
    for (int64_t e = 0; e < op.numel && bad < 5; ++e) {
      const size_t at = op.offset + static_cast<size_t>(e) * es;
      float sum = 0.0f;
      for (const auto& bytes : in) sum += decode_at(op.dtype, bytes.data() + at);
      uint8_t want[4];
      if (op.dtype == DType::kF32) {
        std::memcpy(want, &sum, 4);
      } else {
        const uint16_t b = to_half_bits(op.dtype, sum);
        std::memcpy(want, &b, 2);
      }
      if (std::memcmp(want, out[0].data() + at, es) != 0) {
        ADD_FAILURE() << what << ": op " << i << " (" << dtype_name(op.dtype) << ", n=" << op.numel
                      << ") element " << e << " = " << decode_at(op.dtype, out[0].data() + at)
                      << ", expected " << sum << " (bitwise)";
        ++bad;
      }
    }
  }
  for (size_t r = 1; r < out.size(); ++r) {
    EXPECT_TRUE(out[r] == out[0]) << what << ": rank " << r << " differs bitwise from rank 0";
  }
}

void CUDART_CB sleep_microseconds(void* us) {
  std::this_thread::sleep_for(std::chrono::microseconds(reinterpret_cast<uintptr_t>(us)));
}

TEST(NcclCommunicatorTest, StressManySizesSkewedRanksEagerAndGraph) {
  REQUIRE_TWO_GPUS();
  for (const PathCase& path : {kPaths[1], kPaths[2]}) {
    Ranks ranks(path.oneshot_max_bytes, path.protocol);
    ASSERT_TRUE(ranks.ok());
    const int n = ranks.size();
    size_t total = 0;
    const std::vector<StressOp> ops = stress_plan(20000, &total);
    RankBuffers buf(ranks, total);
    std::vector<int> graphs(static_cast<size_t>(n), -1);
    for (int round = 0; round < 3; ++round) {  // 0: eager, then capture; 1, 2: graph replays
      const auto in = stress_inputs(ops, n, total, 20001 + static_cast<uint64_t>(round));
      std::vector<std::vector<uint8_t>> out(static_cast<size_t>(n), std::vector<uint8_t>(total));
      ranks.on_ranks([&](int r) {
        const auto ri = static_cast<size_t>(r);
        CudaBackend& gpu = ranks.gpu(r);
        Communicator& comm = ranks.comm(r);
        char* base = static_cast<char*>(buf.ptrs[ri]);
        gpu.copy_to_device(base, in[ri].data(), total);
        gpu.synchronize();
        auto run_all = [&] {
          for (size_t i = 0; i < ops.size(); ++i) {
            const uint64_t h = (i * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(r) << 40);
            if ((h >> 7) % 97 == static_cast<uint64_t>(r)) {  // ~1% of ops, per rank
              const uintptr_t us = 100 + (h >> 20) % 1900;
              cudaLaunchHostFunc(gpu.stream(), sleep_microseconds, reinterpret_cast<void*>(us));
            }
            Tensor x(base + ops[i].offset, ops[i].dtype, {ops[i].numel});
            comm.all_reduce_sum(x);
          }
        };
        if (round == 0) {
          run_all();
          gpu.synchronize();
        } else {
          gpu.replay_graph(graphs[ri]);
        }
        gpu.copy_to_host(out[ri].data(), base, total);
        if (round == 0) graphs[ri] = gpu.capture_graph(run_all);
      });
      const std::string what =
          std::string(path.name) + " stress " + (round == 0 ? "eager" : "graph replay");
      for (int g : graphs) ASSERT_GE(g, 0) << what << ": capture failed";
      ASSERT_TRUE(ranks.healthy()) << what;
      check_stress(ops, in, out, what);
    }
  }
}

// ---- all_reduce_add_rms_norm -------------------------------------------------
//
// Every rank holds its partial x [rows, hidden] and the same residual and
// weight (as in a decoder). Reference on the host: s = the f32 rank-order sum
// rounded to the dtype, residual' = round(residual + s), out =
// round(round(residual' * inv) * w) with inv = 1 / sqrt(mean(residual'^2) +
// eps) (norm_kernels.h). The one-shot path must give x and residual' exactly,
// out within 2 ulps of the dtype and 1e-5 relative (the sum of squares' f32
// order: inv may differ from the host's in its last bits), bitwise the
// same as the unfused one-shot all-reduce + CudaBackend::add_rms_norm for
// 16-bit dtypes, and bitwise the same on every rank; the NCCL path
// (threshold 0: the unfused fallback) within NCCL's tolerance.

struct NormCase {
  NormCase(int ranks, DType t, int64_t rows, int64_t hidden, uint64_t salt)
      : dtype(t), rows(rows), hidden(hidden) {
    std::mt19937_64 gen(seed() ^ (salt * 0x9e3779b97f4a7c15ull));
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    auto random = [&](int64_t n, float scale) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = scale * d(gen);
      return encode(t, v);
    };
    for (int r = 0; r < ranks; ++r) parts.push_back(random(rows * hidden, 1.0f));
    residual = random(rows * hidden, 2.0f);
    weight = random(hidden, 1.5f);
    results.resize(static_cast<size_t>(ranks));
  }
  size_t bytes() const { return static_cast<size_t>(rows * hidden) * dtype_size(dtype); }
  float round(float v) const { return decode(dtype, encode(dtype, {v}), 0); }

  // results[r] = x | residual | out downloaded from rank r.
  void check(bool exact_sum, const std::string& what) const {
    const size_t n = static_cast<size_t>(rows * hidden);
    const float eps_dt = eps_of(dtype);
    int bad = 0;
    for (int64_t row = 0; row < rows && bad < 5; ++row) {
      std::vector<float> res(static_cast<size_t>(hidden));
      double sum_sq = 0.0;
      for (int64_t i = 0; i < hidden; ++i) {
        const size_t e = static_cast<size_t>(row * hidden + i);
        float sum = 0.0f, abs_sum = 0.0f;
        for (const auto& p : parts) {
          sum += decode(dtype, p, e);
          abs_sum += std::fabs(decode(dtype, p, e));
        }
        const float s = round(sum);
        const float got_x = decode(dtype, results[0], e);
        const float got_res = decode(dtype, results[0], n + e);
        const float want_res = round(decode(dtype, residual, e) + s);
        const float tol_x = exact_sum ? 0.0f : parts.size() * eps_dt * abs_sum + 1e-6f;
        const float tol_res = exact_sum ? 0.0f : tol_x + 2.0f * eps_dt * std::fabs(want_res);
        if (!(std::fabs(got_x - s) <= tol_x) || !(std::fabs(got_res - want_res) <= tol_res)) {
          ADD_FAILURE() << what << ": row " << row << " element " << i << ": x " << got_x
                        << " (want " << s << "), residual " << got_res << " (want " << want_res
                        << ")";
          if (++bad >= 5) break;
        }
        res[static_cast<size_t>(i)] = got_res;  // the norm of what was stored
        sum_sq += static_cast<double>(got_res) * got_res;
      }
      const float inv =
          static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(hidden) + kEps));
      for (int64_t i = 0; i < hidden && bad < 5; ++i) {
        const size_t e = static_cast<size_t>(row * hidden + i);
        const float want = round(round(res[static_cast<size_t>(i)] * inv) *
                                 decode(dtype, weight, static_cast<size_t>(i)));
        const float got = decode(dtype, results[0], 2 * n + e);
        // Two roundings of the dtype, plus the f32 sum of squares' order
        // (which alone shows in f32).
        const float tol = (4.0f * eps_dt + 1e-5f) * std::fabs(want) + 1e-6f;
        if (!(std::fabs(got - want) <= tol)) {
          ADD_FAILURE() << what << ": out row " << row << " element " << i << " = " << got
                        << ", expected " << want << " (tolerance " << tol << ")";
          ++bad;
        }
      }
    }
    for (size_t r = 1; r < results.size(); ++r) {
      EXPECT_EQ(std::memcmp(results[0].data(), results[r].data(), results[0].size()), 0)
          << what << ": rank " << r << "'s x | residual | out differ bitwise from rank 0's";
    }
  }

  static constexpr float kEps = 1e-5f;
  DType dtype;
  int64_t rows, hidden;
  std::vector<std::vector<uint8_t>> parts;
  std::vector<uint8_t> residual, weight;
  std::vector<std::vector<uint8_t>> results;
};

// Group sizes to test: 2 and every GPU (4 on a 4-GPU machine).
std::vector<int> group_sizes() {
  std::vector<int> v = {2};
  if (gpu_count() > 2) v.push_back(gpu_count());
  return v;
}

// Per rank: x, residual, out views of `buf` (each bytes apart) and w after them.
struct NormViews {
  NormViews(void* base, const NormCase& c) {
    char* p = static_cast<char*>(base);
    const size_t b = (c.bytes() + 255) / 256 * 256;
    x = Tensor(p, c.dtype, {c.rows, c.hidden});
    residual = Tensor(p + b, c.dtype, {c.rows, c.hidden});
    out = Tensor(p + 2 * b, c.dtype, {c.rows, c.hidden});
    w = Tensor(p + 3 * b, c.dtype, {c.hidden});
  }
  static size_t bytes_for(size_t bytes, int64_t hidden) {
    return 3 * ((bytes + 255) / 256 * 256) + hidden * 4 + 256;
  }
  void upload(CudaBackend& gpu, const NormCase& c, int r) {
    gpu.copy_to_device(x.data, c.parts[static_cast<size_t>(r)].data(), c.bytes());
    gpu.copy_to_device(residual.data, c.residual.data(), c.bytes());
    gpu.copy_to_device(w.data, c.weight.data(), c.weight.size());
  }
  std::vector<uint8_t> download(CudaBackend& gpu, const NormCase& c) {
    std::vector<uint8_t> all(3 * c.bytes());
    gpu.copy_to_host(all.data(), x.data, c.bytes());
    gpu.copy_to_host(all.data() + c.bytes(), residual.data, c.bytes());
    gpu.copy_to_host(all.data() + 2 * c.bytes(), out.data, c.bytes());
    return all;
  }
  Tensor x, residual, out, w;
};

// Shapes of the fused tests: rows around the 32-block grid (one row a block,
// a block with two rows, 16 rows a block); hidden odd (scalar steps), a
// vector multiple whose thread count is no power of two (2880: 384 threads
// in bf16), the 512- and 1024-thread launches (4096, 8192 in bf16), and an
// unaligned-width one (8200).
const int64_t kNormRows[] = {1, 2, 7, 8, 33, 64, 65, 512};
const int64_t kNormHiddens[] = {7, 1000, 2880, 4096, 8192, 8200};

TEST(NcclCommunicatorTest, AllReduceAddRmsNormMatchesHostReferenceOnEveryRank) {
  REQUIRE_TWO_GPUS();
  uint64_t salt = 7000;
  for (int n : group_sizes()) {
    for (const PathCase& path : {kPaths[0], kPaths[1], kPaths[2]}) {
      Ranks ranks(path.oneshot_max_bytes, path.protocol, n);
      ASSERT_TRUE(ranks.ok());
      for (DType t : kTypes) {
        if (t == DType::kF32 && path.oneshot_max_bytes == 0)
          continue;  // add_rms_norm is 16-bit on cuda
        for (int64_t hidden : kNormHiddens) {
          for (int64_t rows : kNormRows) {
            NormCase c(n, t, rows, hidden, salt++);
            const size_t bytes = NormViews::bytes_for(c.bytes(), hidden);
            RankBuffers fused(ranks, bytes), plain(ranks, bytes);
            std::vector<std::vector<uint8_t>> unfused(static_cast<size_t>(n));
            ranks.on_ranks([&](int r) {
              CudaBackend& gpu = ranks.gpu(r);
              NormViews f(fused.ptrs[static_cast<size_t>(r)], c),
                  u(plain.ptrs[static_cast<size_t>(r)], c);
              f.upload(gpu, c, r);
              u.upload(gpu, c, r);
              ranks.comm(r).all_reduce_add_rms_norm(gpu, f.x, f.residual, f.w, NormCase::kEps,
                                                    f.out);
              c.results[static_cast<size_t>(r)] = f.download(gpu, c);
              if (t == DType::kF32) return;
              ranks.comm(r).all_reduce_sum(u.x);
              gpu.add_rms_norm(u.residual, u.x, u.w, NormCase::kEps, u.out);
              unfused[static_cast<size_t>(r)] = u.download(gpu, c);
            });
            const std::string what = std::string(path.name) + " fused " + std::to_string(n) +
                                     " ranks " + std::string(dtype_name(t)) +
                                     " rows=" + std::to_string(rows) +
                                     " hidden=" + std::to_string(hidden);
            ASSERT_TRUE(ranks.healthy()) << what;
            const bool oneshot = path.oneshot_max_bytes > 0;
            c.check(oneshot, what);
            if (oneshot && t != DType::kF32) {
              EXPECT_TRUE(unfused[0] == c.results[0])
                  << what << ": differs bitwise from the unfused one-shot ops";
            }
          }
        }
      }
    }
  }
}

// The fused op twice and a plain all-reduce between them (the other kernel
// family on the same peer buffers) captured in one graph per rank and
// replayed with new data.
TEST(NcclCommunicatorTest, AllReduceAddRmsNormInsideCudaGraphReplays) {
  REQUIRE_TWO_GPUS();
  constexpr int kReplays = 4;
  uint64_t salt = 9000;
  for (int n : group_sizes()) {
    for (const cuda::OneShotProtocol protocol : {kPush, kBarrier}) {
      Ranks ranks(kMaxOneShotBytes, protocol, n);  // every case one-shot
      ASSERT_TRUE(ranks.ok());
      for (DType t : kTypes) {
        // Fewer shapes than the eager test (each case captures and replays
        // graphs on every rank): the vector and odd widths, push rows (1..64)
        // and the barrier fallback above them (65, 512).
        for (int64_t hidden : {int64_t{4096}, int64_t{8200}}) {
          for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{65}, int64_t{512}}) {
            const size_t case_bytes = static_cast<size_t>(rows * hidden) * dtype_size(t);
            const size_t bytes = NormViews::bytes_for(case_bytes, hidden);
            RankBuffers a(ranks, bytes), b(ranks, bytes), m(ranks, 4096 * 4);
            std::vector<int> graphs(static_cast<size_t>(n), -1);
            std::vector<void*> host_in(static_cast<size_t>(n));
            std::vector<uint8_t> wa, wb;
            for (int replay = -1; replay < kReplays; ++replay) {
              NormCase ca(n, t, rows, hidden, salt++), cb(n, t, rows, hidden, salt++);
              Case mid(n, t, 3001, salt++);
              ranks.on_ranks([&](int r) {
                const auto ri = static_cast<size_t>(r);
                CudaBackend& gpu = ranks.gpu(r);
                Communicator& comm = ranks.comm(r);
                NormViews va(a.ptrs[ri], ca), vb(b.ptrs[ri], cb);
                Tensor xm(m.ptrs[ri], t, {3001});
                // Pinned staging (graphs re-read it): parts, residuals, mid input.
                const size_t mid_bytes = xm.nbytes();
                if (host_in[ri] == nullptr)
                  host_in[ri] = gpu.allocate_host(4 * case_bytes + mid_bytes);
                char* h = static_cast<char*>(host_in[ri]);
                std::memcpy(h, ca.parts[ri].data(), case_bytes);
                std::memcpy(h + case_bytes, ca.residual.data(), case_bytes);
                std::memcpy(h + 2 * case_bytes, cb.parts[ri].data(), case_bytes);
                std::memcpy(h + 3 * case_bytes, cb.residual.data(), case_bytes);
                std::memcpy(h + 4 * case_bytes, mid.inputs[ri].data(), mid_bytes);
                if (replay < 0) {  // weights stay put: uploaded once
                  va.upload(gpu, ca, r);
                  vb.upload(gpu, cb, r);
                  gpu.synchronize();
                }
                auto step = [&] {
                  gpu.copy_to_device(va.x.data, h, case_bytes);
                  gpu.copy_to_device(va.residual.data, h + case_bytes, case_bytes);
                  gpu.copy_to_device(vb.x.data, h + 2 * case_bytes, case_bytes);
                  gpu.copy_to_device(vb.residual.data, h + 3 * case_bytes, case_bytes);
                  gpu.copy_to_device(xm.data, h + 4 * case_bytes, mid_bytes);
                  comm.all_reduce_add_rms_norm(gpu, va.x, va.residual, va.w, NormCase::kEps,
                                               va.out);
                  comm.all_reduce_sum(xm);
                  comm.all_reduce_add_rms_norm(gpu, vb.x, vb.residual, vb.w, NormCase::kEps,
                                               vb.out);
                };
                if (replay < 0) {
                  step();
                  gpu.synchronize();
                  graphs[ri] = gpu.capture_graph(step);
                  return;
                }
                gpu.replay_graph(graphs[ri]);
                ca.results[ri] = va.download(gpu, ca);
                cb.results[ri] = vb.download(gpu, cb);
                mid.results[ri].resize(mid_bytes);
                gpu.copy_to_host(mid.results[ri].data(), xm.data, mid_bytes);
              });
              const std::string what =
                  std::string(protocol == kPush ? "push" : "barrier") + " fused graph " +
                  std::to_string(n) + " ranks " + std::string(dtype_name(t)) +
                  " rows=" + std::to_string(rows) + " hidden=" + std::to_string(hidden) +
                  " replay " + std::to_string(replay);
              for (int g : graphs) ASSERT_GE(g, 0) << what << ": capture failed";
              ASSERT_TRUE(ranks.healthy()) << what;
              if (replay < 0) {  // the weights uploaded once, from these cases
                wa = ca.weight;
                wb = cb.weight;
                continue;
              }
              ca.weight = wa;
              cb.weight = wb;
              ca.check(true, what + " (first)");
              cb.check(true, what + " (second)");
              mid.check(true, what + " (all-reduce between)");
            }
            for (int r = 0; r < n; ++r)
              ranks.gpu(r).deallocate_host(host_in[static_cast<size_t>(r)]);
          }
        }
      }
    }
  }
}

// ---- all_gather_columns --------------------------------------------------------

TEST(NcclCommunicatorTest, AllGatherColumnsPlacesEveryRanksBlock) {
  REQUIRE_TWO_GPUS();
  uint64_t salt = 11000;
  for (int n : group_sizes()) {
    for (const PathCase& path : kPaths) {
      Ranks ranks(path.oneshot_max_bytes, path.protocol, n);
      ASSERT_TRUE(ranks.ok());
      for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{17}}) {
        for (int64_t cols : {int64_t{1}, int64_t{1000}, int64_t{64128}}) {
          for (int64_t pad : {int64_t{0}, int64_t{1}, cols - 1}) {
            const int64_t width = n * cols - pad;
            if (pad > 0 && pad == cols - 1 && cols == 1) continue;
            Case c(n, DType::kF32, rows * cols, salt++);
            RankBuffers x(ranks, static_cast<size_t>(rows * cols) * 4),
                out(ranks, static_cast<size_t>(rows * width) * 4);
            ranks.on_ranks([&](int r) {
              const auto ri = static_cast<size_t>(r);
              CudaBackend& gpu = ranks.gpu(r);
              Tensor xt(x.ptrs[ri], DType::kF32, {rows, cols}),
                  ot(out.ptrs[ri], DType::kF32, {rows, width});
              gpu.copy_to_device(xt.data, c.inputs[ri].data(), xt.nbytes());
              ranks.comm(r).all_gather_columns(xt, ot);
              c.results[ri].resize(ot.nbytes());
              gpu.copy_to_host(c.results[ri].data(), ot.data, ot.nbytes());
            });
            const std::string what = std::string(path.name) + " gather " + std::to_string(n) +
                                     " ranks rows=" + std::to_string(rows) +
                                     " cols=" + std::to_string(cols) +
                                     " width=" + std::to_string(width);
            ASSERT_TRUE(ranks.healthy()) << what;
            int bad = 0;
            for (int64_t row = 0; row < rows && bad < 5; ++row) {
              for (int64_t w = 0; w < width && bad < 5; ++w) {
                const auto src = static_cast<size_t>(w / cols);
                const float want =
                    decode(DType::kF32, c.inputs[src], static_cast<size_t>(row * cols + w % cols));
                const float got =
                    decode(DType::kF32, c.results[0], static_cast<size_t>(row * width + w));
                if (got != want) {
                  ADD_FAILURE() << what << ": out[" << row << ", " << w << "] = " << got
                                << ", expected " << want;
                  ++bad;
                }
              }
            }
            for (int r = 1; r < n; ++r)
              EXPECT_TRUE(c.results[static_cast<size_t>(r)] == c.results[0])
                  << what << " rank " << r;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagoda
