// One-shot all-reduce over peer memory, for small messages (the all-reduce
// after each row-parallel projection in decode is a few KiB to a few hundred
// KiB, where NCCL's ring pays several NVLink round trips).
//
// The ranks are threads of one process with peer access enabled between
// every pair of GPUs, so a kernel on GPU i loads and stores GPU j's memory
// directly. Each rank owns one "peer buffer" on its GPU (oneshot_buffer_bytes
// long, zeroed before the first launch):
//   [flags:    kOneShotBlocks x kOneShotMaxRanks u32]  flags[b][j]: the epoch
//              rank j's block b reached (written by rank j)
//   [counters: kOneShotBlocks u32]                      block b's epoch, advanced
//              by the kernel itself (so CUDA graph replays keep counting)
//   [data:     2 halves of `capacity` bytes]            epoch parity picks the half
//
// One launch on every rank (same n, dtype and capacity; x may differ):
//   1. block b copies its slice of x into the own buffer's half (epoch & 1);
//   2. block b's barrier: it stores the epoch into flags[b][rank] of every
//      rank's buffer (release, system scope), then waits until its own
//      flags[b][j] reached the epoch for every j (acquire);
//   3. block b sums its slice over the ranks' buffers in rank order with f32
//      accumulation and writes x: every rank computes the same bits.
// Block b copies and reads the same slice on every rank, so one barrier per
// block suffices. A rank that runs ahead writes the other half in the next
// launch; it can come back to this half only after passing the next launch's
// barrier, which needs every rank to have entered that launch, i.e. finished
// this one (launches on a stream are ordered: the kernel waits for its
// predecessor before touching memory, also under PDL).
//
// The wait in step 2 is bounded, so that a rank whose peer never launches
// (it failed) does not spin forever: it ends early when the group's abort
// word (OneShotControl, in host memory mapped into every GPU) is set, or
// after kOneShotWaitSeconds, when it sets the timed-out word; either way x
// is left unspecified and the host reports the failure (status()).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

constexpr int kOneShotMaxRanks = 8;
// A fixed grid (every launch uses every block's counter) of 512 threads.
constexpr int kOneShotBlocks = 32;
constexpr int kOneShotThreads = 512;
// How long a block waits for its peers before it gives up. Generous: before
// the ranks first meet on the host (at start-up, a rank that loaded its
// weights sooner waits here for the slowest one's load), a peer may be
// minutes late without anything being wrong.
constexpr double kOneShotWaitSeconds = 600.0;

// A group's control words, in pinned host memory mapped into every GPU of
// the group (cudaHostAllocMapped | cudaHostAllocPortable), zeroed at
// creation. The host sets `aborted` (Communicator::abort); a kernel that gave
// up waiting sets `timed_out`.
struct OneShotControl {
  uint32_t aborted;
  uint32_t timed_out;
};

// Bytes of one rank's peer buffer for messages of up to `capacity` bytes.
size_t oneshot_buffer_bytes(size_t capacity);

struct OneShotParams {
  void* buffers[kOneShotMaxRanks] = {};  // every rank's peer buffer
  int size = 0;                          // ranks, 2..kOneShotMaxRanks
  int rank = 0;
  size_t capacity = 0;                // bytes of one data half
  DType dtype = DType::kBF16;         // f32, bf16 or f16
  void* x = nullptr;                  // [n] on this rank's GPU, reduced in place
  int64_t n = 0;                      // elements; n * dtype size <= capacity
  OneShotControl* control = nullptr;  // the group's (device address of the mapping)
};

// Enqueues the all-reduce on `stream` (capturable). Every rank must launch it
// with matching parameters, or the ranks wait for each other until the group
// is aborted or kOneShotWaitSeconds pass.
cudaError_t launch_oneshot_all_reduce(const OneShotParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
