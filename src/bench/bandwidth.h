// Memory-bandwidth ceilings that decode speed is measured against
// (/work/shared/BENCHMARKS.md: bytes read + written by a large copy over its
// time). The CPU ceiling is measured here; a device ceiling comes from a copy
// routine handed in (e.g. a backend's device-to-device copy) or from a figure
// measured elsewhere (bench/run_device.sh measures it with torch).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "core/result.h"

namespace pagoda::bench {

struct BandwidthCeiling {
  double bytes_per_s = 0.0;  // bytes read + bytes written per second
  std::string method;        // how it was measured, for the report
};

// Copies `bytes` from src to dst and returns when the copy is complete.
using CopyFn = std::function<void(void* dst, const void* src, size_t bytes)>;

// Best of `iters` timed copies of `bytes` (after one warm-up) between two
// buffers allocated by `alloc` and released by `release`. Errors: allocation
// failure, bytes == 0.
Result<BandwidthCeiling> measure_copy_bandwidth(const std::function<void*(size_t)>& alloc,
                                                const std::function<void(void*)>& release,
                                                const CopyFn& copy, size_t bytes, int iters,
                                                std::string method);

// Host memory: memcpy of 512 MiB (far beyond any cache) split over the core
// thread pool.
Result<BandwidthCeiling> measure_host_bandwidth(size_t bytes = size_t{1} << 29, int iters = 5);

}  // namespace pagoda::bench
