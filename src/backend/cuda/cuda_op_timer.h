// CudaOpTimer: the OpTimer of the CUDA backend. Each interval is a pair of
// CUDA events recorded on the backend's stream around the op, read with
// cudaEventElapsedTime once the device has run them (take()).
//
// Why pairs and a run-ahead delay rather than one event between
// consecutive ops: an eager step at batch 1 is launch-bound (a few µs of
// host work per kernel against kernels of a few µs), so an event pair
// around an op would otherwise time the host's launch gap as the op's. Before
// every kOpsPerDelay-th interval the timer enqueues a spin kernel of
// kDelayNs (spin_wait.h) that holds the stream while the host enqueues the
// next kOpsPerDelay ops; behind it they run back to back as in a graph
// replay. The delays fall between intervals, never inside one, which is why
// each op has its own begin event. What remains inside an interval: the op's
// kernels and the gaps between them, and the loss of programmatic dependent
// launch overlap with the neighbouring ops (an event between two kernels
// ends it), about a microsecond a kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backend/op_timer.h"

namespace pagoda {

class CudaOpTimer final : public OpTimer {
 public:
  // Ops between two delays, and the delay: 64 ops of ~3 kernels and 2 events
  // at a few µs of host time each take well under 2 ms to enqueue.
  static constexpr size_t kOpsPerDelay = 64;
  static constexpr uint64_t kDelayNs = 2'000'000;

  explicit CudaOpTimer(cudaStream_t stream) : stream_(stream) {}
  ~CudaOpTimer() override;
  CudaOpTimer(const CudaOpTimer&) = delete;
  CudaOpTimer& operator=(const CudaOpTimer&) = delete;

  void begin(size_t i) override;
  void end(size_t i) override;
  std::vector<double> take() override;
  std::string method() const override;

 private:
  cudaEvent_t event(size_t k);  // the pool's k-th event, created on first use

  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;  // 2i: begin of interval i, 2i + 1: its end
  size_t num_intervals_ = 0;
};

}  // namespace pagoda
