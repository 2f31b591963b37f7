// A kernel that occupies the stream for a fixed time and does nothing else:
// the op profiler (cuda_op_timer.h) enqueues it so that the host runs ahead
// of the device and the timed ops behind it execute back to back.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::cuda {

struct SpinWaitParams {
  uint64_t nanoseconds = 0;  // wall time the single thread spins (%globaltimer)
};

cudaError_t launch_spin_wait(const SpinWaitParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
