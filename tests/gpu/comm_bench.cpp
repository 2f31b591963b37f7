// Latency of all_reduce_sum (bf16) per message size (2 B to 64 MiB) on every
// GPU of the machine: NCCL vs the one-shot peer-memory kernel on its two
// protocols (push + Lamport, which takes messages up to
// oneshot_push_capacity and the barrier protocol above; barrier alone), each
// launched eagerly and replayed from a CUDA graph (as the engine's decode
// steps run). The table's crossover is what default_oneshot_max_bytes
// (backend/cuda/nccl_communicator.h) is set from. A second table times what
// a decoder runs after each row-parallel projection, [rows, 4096] bf16 (the
// 8B width) at kNormRows rows within the one-shot threshold, from a graph:
// all_reduce_add_rms_norm forced onto the fused one-shot kernel on either
// protocol, the same unfused (one-shot all_reduce_sum on the push protocol,
// then CudaBackend::add_rms_norm), and through NCCL (all_reduce_sum, then
// add_rms_norm); its last line, the largest row count up to which the fused
// kernel is ahead, is what kDefaultFusedNormMaxRows
// (backend/fused_norm_route.h) is set from.
//
// Timing, per size and path, on one thread per rank: eager: kWarmup calls,
// a host barrier, then kEagerCalls calls between CUDA events on rank 0's
// stream (microseconds per call); graph: kGraphCalls calls captured in one
// graph, replayed once, then kReps timed replays (median per call).
//
// Usage: comm_bench [--quick]   (--quick: sizes up to 4 MiB)
#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/fused_norm_route.h"

namespace pagoda {
namespace {

constexpr int kWarmup = 5;
constexpr int kEagerCalls = 50;
constexpr int kGraphCalls = 20;
constexpr int kReps = 7;
// The fused-norm table's rows: around kDefaultFusedNormMaxRows, where the
// fused kernel stops winning, then two points of the loss above it.
constexpr int64_t kNormRows[] = {1, 2, 4, 8, 16, 24, 32, 64, 128, 512};
constexpr int64_t kNormHidden = 4096;

bool g_ok = true;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    g_ok = false;
  }
}

struct Timing {
  double eager_us = 0.0;
  double graph_us = 0.0;
};

// What one timed call runs.
enum class Op {
  kAllReduce,  // all_reduce_sum(x)
  kFused,      // all_reduce_add_rms_norm(x, residual, w -> out), fused at every row count
  kUnfused,    // all_reduce_sum(x), then add_rms_norm(residual, x, w -> out)
};

// The [rows, hidden] view of a message of `bytes` bf16 (Op::kFused / kUnfused).
void norm_shape(size_t bytes, int64_t* rows, int64_t* hidden) {
  const auto n = static_cast<int64_t>(bytes / 2);
  *hidden = n >= kNormHidden ? kNormHidden : n;
  *rows = n / *hidden;
}

// Runs fn(rank) on one thread per rank with the rank's device current.
void on_ranks(const std::vector<CudaBackend*>& gpus, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(gpus.size()); ++r) {
    threads.emplace_back([&, r] {
      gpus[static_cast<size_t>(r)]->make_current();
      fn(r);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Times one path at every size on fresh backends (destroyed, with their
// graphs, before the communicators); rank 0's numbers.
std::vector<Timing> bench_path(int count, int64_t oneshot_max_bytes,
                               cuda::OneShotProtocol protocol, const std::vector<size_t>& sizes,
                               std::string* gpu_name, Op op = Op::kAllReduce) {
  std::vector<std::unique_ptr<Communicator>> comms;  // destroyed after the backends
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<CudaBackend*> gpus;
  for (int d = 0; d < count; ++d) {
    owned.push_back(create_cuda_backend(d, DType::kBF16));
    if (owned.back() == nullptr) {
      std::fprintf(stderr, "comm_bench: no CUDA backend on device %d\n", d);
      g_ok = false;
      return std::vector<Timing>(sizes.size());
    }
    gpus.push_back(static_cast<CudaBackend*>(owned.back().get()));
  }
  *gpu_name = gpus[0]->name();
  NcclCommunicatorOptions options;
  options.oneshot_max_bytes = oneshot_max_bytes;
  options.oneshot_protocol = protocol;
  if (op == Op::kFused) options.fused_norm_max_rows = kMaxFusedNormRows;
  auto created = create_nccl_communicators(gpus, options);
  if (!created.ok()) {
    std::fprintf(stderr, "create_nccl_communicators: %s\n", created.error().message.c_str());
    g_ok = false;
    return std::vector<Timing>(sizes.size());
  }
  comms = std::move(created).value();
  const int n = static_cast<int>(gpus.size());
  std::vector<Timing> out(sizes.size());
  const size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  std::vector<void*> bufs(static_cast<size_t>(n));
  on_ranks(gpus, [&](int r) {
    CudaBackend& gpu = *gpus[static_cast<size_t>(r)];
    // x, then (Op::kFused / kUnfused) residual, out and w.
    bufs[static_cast<size_t>(r)] = gpu.allocate(3 * max_bytes + 8192);
    // Small values (bf16 ~ 0.0078); sums that overflow do not change the timing.
    std::vector<uint16_t> h((3 * max_bytes + 8192) / 2, 0x3c00);
    gpu.copy_to_device(bufs[static_cast<size_t>(r)], h.data(), h.size() * 2);
    gpu.synchronize();
  });
  std::barrier sync(n);
  for (size_t s = 0; s < sizes.size(); ++s) {
    on_ranks(gpus, [&](int r) {
      CudaBackend& gpu = *gpus[static_cast<size_t>(r)];
      Communicator& comm = *comms[static_cast<size_t>(r)];
      char* base = static_cast<char*>(bufs[static_cast<size_t>(r)]);
      int64_t rows = 0, hidden = 0;
      norm_shape(sizes[s], &rows, &hidden);
      Tensor x(base, DType::kBF16, {static_cast<int64_t>(sizes[s] / 2)});
      Tensor x2(base, DType::kBF16, {rows, hidden});
      Tensor residual(base + max_bytes, DType::kBF16, {rows, hidden});
      Tensor normed(base + 2 * max_bytes, DType::kBF16, {rows, hidden});
      const Tensor w(base + 3 * max_bytes, DType::kBF16, {hidden});
      auto call = [&] {
        switch (op) {
          case Op::kAllReduce:
            return comm.all_reduce_sum(x);
          case Op::kFused:
            return comm.all_reduce_add_rms_norm(gpu, x2, residual, w, 1e-5f, normed);
          case Op::kUnfused:
            comm.all_reduce_sum(x2);
            return gpu.add_rms_norm(residual, x2, w, 1e-5f, normed);
        }
      };
      cudaStream_t stream = gpu.stream();
      cudaEvent_t start, stop;
      check(cudaEventCreate(&start), "cudaEventCreate");
      check(cudaEventCreate(&stop), "cudaEventCreate");
      auto elapsed_ms = [&] {
        float ms = 0.0f;
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        return static_cast<double>(ms);
      };
      for (int i = 0; i < kWarmup; ++i) call();
      gpu.synchronize();
      sync.arrive_and_wait();
      check(cudaEventRecord(start, stream), "cudaEventRecord");
      for (int i = 0; i < kEagerCalls; ++i) call();
      check(cudaEventRecord(stop, stream), "cudaEventRecord");
      const double eager_ms = elapsed_ms();

      const int graph = gpu.capture_graph([&] {
        for (int i = 0; i < kGraphCalls; ++i) call();
      });
      std::vector<double> reps;
      if (graph >= 0) {
        gpu.replay_graph(graph);
        gpu.synchronize();
        sync.arrive_and_wait();
        for (int k = 0; k < kReps; ++k) {
          check(cudaEventRecord(start, stream), "cudaEventRecord");
          gpu.replay_graph(graph);
          check(cudaEventRecord(stop, stream), "cudaEventRecord");
          reps.push_back(elapsed_ms() * 1e3 / kGraphCalls);
        }
        std::sort(reps.begin(), reps.end());
      } else {
        sync.arrive_and_wait();
        g_ok = false;
      }
      if (r == 0) {
        out[s].eager_us = eager_ms * 1e3 / kEagerCalls;
        out[s].graph_us = reps.empty() ? -1.0 : reps[reps.size() / 2];
      }
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    });
    for (int r = 0; r < n; ++r) {
      if (!comms[static_cast<size_t>(r)]->status().ok() || !gpus[static_cast<size_t>(r)]->status().ok()) {
        std::fprintf(stderr, "rank %d failed at %zu bytes\n", r, sizes[s]);
        g_ok = false;
      }
    }
  }
  on_ranks(gpus, [&](int r) { gpus[static_cast<size_t>(r)]->deallocate(bufs[static_cast<size_t>(r)]); });
  owned.clear();
  return out;
}

std::string human(size_t bytes) {
  char b[32];
  if (bytes >= (size_t{1} << 20)) {
    std::snprintf(b, sizeof b, "%zu MiB", bytes >> 20);
  } else if (bytes >= 1024) {
    std::snprintf(b, sizeof b, "%zu KiB", bytes >> 10);
  } else {
    std::snprintf(b, sizeof b, "%zu B", bytes);
  }
  return b;
}

}  // namespace
}  // namespace pagoda

int main(int argc, char** argv) {
  using namespace pagoda;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
    std::printf("comm_bench: SKIP: needs at least 2 CUDA GPUs (found %d)\n", count);
    return 0;
  }
  std::vector<size_t> sizes;
  for (size_t b = 2; b <= (static_cast<size_t>(quick ? 4 : 64) << 20); b *= 2) sizes.push_back(b);

  constexpr auto kPush = cuda::OneShotProtocol::kPush;
  constexpr auto kBarrier = cuda::OneShotProtocol::kBarrier;
  std::string gpu_name;
  const std::vector<Timing> nccl = bench_path(count, 0, kPush, sizes, &gpu_name);
  const std::vector<Timing> push = bench_path(count, kMaxOneShotBytes, kPush, sizes, &gpu_name);
  const std::vector<Timing> barrier =
      bench_path(count, kMaxOneShotBytes, kBarrier, sizes, &gpu_name);

  std::printf(
      "\nall_reduce_sum bf16 on %d x %s: microseconds per call (rank 0); push = push + Lamport up "
      "to %zu bytes, barrier above\n",
      count, gpu_name.c_str(), cuda::oneshot_push_capacity(kMaxOneShotBytes));
  std::printf("%10s %8s %8s %8s %8s %8s %8s %8s %11s\n", "size", "nccl e", "push e", "barr e",
              "nccl g", "push g", "barr g", "faster", "busbw GB/s");
  size_t crossover = 0;
  bool oneshot_still_ahead = true;
  for (size_t s = 0; s < sizes.size(); ++s) {
    const double oneshot = std::min(push[s].graph_us, barrier[s].graph_us);
    const bool one = oneshot > 0 && oneshot < nccl[s].graph_us;
    if (one && oneshot_still_ahead) crossover = sizes[s];
    if (!one) oneshot_still_ahead = false;
    const double best = std::min(oneshot, nccl[s].graph_us);
    const char* faster = !one ? "nccl" : push[s].graph_us <= barrier[s].graph_us ? "push" : "barrier";
    // Bus bandwidth as nccl-tests define it: bytes * 2 (n - 1) / n / time.
    const double busbw = static_cast<double>(sizes[s]) * 2.0 * (count - 1) / count / (best * 1e-6) / 1e9;
    std::printf("%10s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8s %11.2f\n", human(sizes[s]).c_str(),
                nccl[s].eager_us, push[s].eager_us, barrier[s].eager_us, nccl[s].graph_us,
                push[s].graph_us, barrier[s].graph_us, faster, busbw);
  }
  std::printf("\none-shot ahead (graph replay) up to %s; default threshold in code: %s (%s overrides)\n",
              crossover > 0 ? human(crossover).c_str() : "never",
              human(static_cast<size_t>(default_oneshot_max_bytes(count))).c_str(), kOneShotMaxBytesEnv);

  // The decoder's all-reduce + residual add + RMSNorm, kNormRows within the default threshold.
  std::vector<size_t> norm_sizes;
  for (int64_t rows : kNormRows) {
    const auto b = static_cast<size_t>(rows * kNormHidden * 2);
    if (static_cast<int64_t>(b) <= default_oneshot_max_bytes(count)) norm_sizes.push_back(b);
  }
  const std::vector<Timing> fused_push =
      bench_path(count, kMaxOneShotBytes, kPush, norm_sizes, &gpu_name, Op::kFused);
  const std::vector<Timing> fused_barrier =
      bench_path(count, kMaxOneShotBytes, kBarrier, norm_sizes, &gpu_name, Op::kFused);
  const std::vector<Timing> unfused =
      bench_path(count, kMaxOneShotBytes, kPush, norm_sizes, &gpu_name, Op::kUnfused);
  const std::vector<Timing> nccl_norm = bench_path(count, 0, kPush, norm_sizes, &gpu_name, Op::kUnfused);
  std::printf(
      "\nall-reduce + residual add + rms_norm, bf16 [rows, 4096], graph replay: microseconds per "
      "call (rank 0)\n");
  std::printf("%10s %6s %12s %14s %14s %14s %8s\n", "size", "rows", "fused push", "fused barrier",
              "unfused push", "nccl unfused", "faster");
  int64_t fused_ahead_rows = 0;
  bool fused_still_ahead = true;
  for (size_t s = 0; s < norm_sizes.size(); ++s) {
    int64_t rows = 0, hidden = 0;
    norm_shape(norm_sizes[s], &rows, &hidden);
    // The protocol the engine's default (push) takes; barrier for comparison.
    const bool fused = fused_push[s].graph_us > 0 && fused_push[s].graph_us < unfused[s].graph_us;
    if (fused && fused_still_ahead) fused_ahead_rows = rows;
    if (!fused) fused_still_ahead = false;
    std::printf("%10s %6lld %12.1f %14.1f %14.1f %14.1f %8s\n", human(norm_sizes[s]).c_str(),
                static_cast<long long>(rows), fused_push[s].graph_us, fused_barrier[s].graph_us,
                unfused[s].graph_us, nccl_norm[s].graph_us, fused ? "fused" : "unfused");
  }
  std::printf("\nfused push ahead of unfused push (graph replay) up to %lld rows; default in code: "
              "%lld rows (%s overrides)\n",
              static_cast<long long>(fused_ahead_rows),
              static_cast<long long>(kDefaultFusedNormMaxRows), kFusedNormMaxRowsEnv);
  return g_ok ? 0 : 1;
}
