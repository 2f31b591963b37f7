#include "backend/cuda/cuda_op_timer.h"

#include <fmt/format.h>

#include "backend/cuda/spin_wait.h"

namespace pagoda {

CudaOpTimer::~CudaOpTimer() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t CudaOpTimer::event(size_t k) {
  while (events_.size() <= k) {
    cudaEvent_t e = nullptr;
    cudaEventCreate(&e);
    events_.push_back(e);
  }
  return events_[k];
}

void CudaOpTimer::begin(size_t i) {
  if (i % kOpsPerDelay == 0) cuda::launch_spin_wait({kDelayNs}, stream_);
  cudaEventRecord(event(2 * i), stream_);
}

void CudaOpTimer::end(size_t i) {
  cudaEventRecord(event(2 * i + 1), stream_);
  num_intervals_ = std::max(num_intervals_, i + 1);
}

std::vector<double> CudaOpTimer::take() {
  cudaStreamSynchronize(stream_);
  std::vector<double> us(num_intervals_, 0.0);
  for (size_t i = 0; i < num_intervals_; ++i) {
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]) == cudaSuccess)
      us[i] = static_cast<double>(ms) * 1000.0;
  }
  num_intervals_ = 0;
  cudaGetLastError();  // an unread pair leaves cudaErrorNotReady: not the backend's error
  return us;
}

std::string CudaOpTimer::method() const {
  return fmt::format(
      "cuda event pair around each op; a {:.1f} ms spin kernel before every {} ops lets the host "
      "run ahead so the ops run back to back",
      static_cast<double>(kDelayNs) / 1e6, kOpsPerDelay);
}

}  // namespace pagoda
