#include "bench/bandwidth.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/thread_pool.h"

namespace pagoda::bench {

Result<BandwidthCeiling> measure_copy_bandwidth(const std::function<void*(size_t)>& alloc,
                                                const std::function<void(void*)>& release,
                                                const CopyFn& copy, size_t bytes, int iters,
                                                std::string method) {
  if (bytes == 0 || iters < 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "bandwidth probe needs bytes > 0 and iters >= 1");
  void* src = alloc(bytes);
  void* dst = src ? alloc(bytes) : nullptr;
  if (!src || !dst) {
    if (src) release(src);
    return make_error(ErrorCode::kResourceExhausted,
                      "bandwidth probe: cannot allocate 2 x " + std::to_string(bytes) + " bytes");
  }
  copy(dst, src, bytes);  // warm-up: page faults, clocks
  double best = 1e300;
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    copy(dst, src, bytes);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  release(dst);
  release(src);
  return BandwidthCeiling{2.0 * static_cast<double>(bytes) / best, std::move(method)};
}

Result<BandwidthCeiling> measure_host_bandwidth(size_t bytes, int iters) {
  constexpr size_t kChunk = size_t{1} << 22;  // 4 MiB per task
  auto alloc = [](size_t n) -> void* {
    void* p = std::malloc(n);
    if (p) std::memset(p, 1, n);  // touch every page before timing
    return p;
  };
  auto copy = [](void* dst, const void* src, size_t n) {
    auto num_chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
    parallel_for(num_chunks, 1, [&](int64_t lo, int64_t hi) {
      size_t begin = static_cast<size_t>(lo) * kChunk;
      size_t end = std::min(n, static_cast<size_t>(hi) * kChunk);
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                  end - begin);
    });
  };
  return measure_copy_bandwidth(
      alloc, [](void* p) { std::free(p); }, copy, bytes, iters,
      "host memcpy over " + std::to_string(num_cpu_threads()) + " threads");
}

}  // namespace pagoda::bench
