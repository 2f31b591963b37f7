// silu_mul_fp8's launch shape (activation_kernels.cu glu_fp8_kernel): how a
// token's row of `groups` kVec-wide vectors is split over the CTAs of a
// thread-block cluster. Host code only, so the shape is testable without a
// GPU; the launch and a captured graph use exactly this.
#pragma once

#include <cstdint>

namespace pagoda::cuda {

// At most kGluMaxClusterCtas CTAs a row (the portable cluster size) of at
// most kGluMaxRowThreads threads (512: 128 registers a thread, so 4 gate and
// 4 up vectors of 8 fit without spilling; at 1024 threads ptxas spills), each
// thread keeping at most kGluMaxVecs vectors in registers: 8 * 512 * 4 * 8 =
// 131072 elements a row with the 8-element vectors.
constexpr int kGluMaxClusterCtas = 8;
constexpr int kGluMaxRowThreads = 512;
constexpr int kGluMaxVecs = 4;
// Enough CTAs to spread over an H100's 132 SMs: the cluster grows while
// num_rows * cluster is below this.
constexpr int64_t kGluTargetCtas = 128;
// Each CTA of a cluster keeps at least this many vectors (the cluster does
// not grow past groups / kGluMinVecsPerCta).
constexpr int64_t kGluMinVecsPerCta = 128;

// The split of num_rows rows of `groups` vectors: grid = num_rows * cluster
// CTAs along x, clusters of `cluster` (1, 2, 4 or 8; 1 = a plain launch) of
// `threads` threads (a multiple of 32, <= kGluMaxRowThreads) with
// cluster * threads * kGluMaxVecs >= groups; threads == 0 when the row is too
// wide for the registers (glu_fp8_wide_kernel, one CTA a row).
struct GluFp8Split {
  int cluster = 1;
  int threads = 0;
};

inline GluFp8Split glu_fp8_split(int64_t num_rows, int64_t groups) {
  GluFp8Split r;
  while (r.cluster < kGluMaxClusterCtas && num_rows * r.cluster < kGluTargetCtas &&
         groups >= 2 * r.cluster * kGluMinVecsPerCta)
    r.cluster *= 2;
  const int64_t per_cta = (groups + r.cluster - 1) / r.cluster;
  const int64_t threads = per_cta >= kGluMaxRowThreads ? kGluMaxRowThreads : (per_cta + 31) / 32 * 32;
  if ((per_cta + threads - 1) / threads <= kGluMaxVecs) r.threads = static_cast<int>(threads);
  return r;
}

}  // namespace pagoda::cuda
