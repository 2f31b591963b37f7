// One-shot all-reduce over peer memory, for small messages (the all-reduce
// after each row-parallel projection in decode is a few KiB to a few hundred
// KiB, where NCCL's ring pays several NVLink round trips).
//
// The ranks are threads of one process with peer access enabled between
// every pair of GPUs, so a kernel on GPU i loads and stores GPU j's memory
// directly. Each rank owns one "peer buffer" on its GPU (oneshot_buffer_bytes
// long, set up by init_oneshot_buffer before the first launch) holding, per
// kernel family (the plain all-reduce; the fused all-reduce + add + RMSNorm)
// and protocol, per-block epoch counters advanced by the kernel itself (so
// CUDA graph replays keep counting) and the data (layout:
// oneshot_protocol.cuh). Two protocols (OneShotProtocol), chosen per launch
// by the same rule on every rank:
//
// Push + Lamport (kPush, messages up to oneshot_push_capacity): each rank
// stores its vector straight into its slot of EVERY rank's buffer, whose
// elements hold a sentinel (-0.0) while empty; each rank polls its own buffer
// until no element is the sentinel, sums in rank order and writes the
// sentinel back. One NVLink crossing, no flags (oneshot_push.cuh: the three
// rotating stages and why a fast rank never overwrites what a slow one reads).
//
// Barrier (kBarrier, and every message too large for the push stages), the
// plain all-reduce, one launch on every rank (same n, dtype and capacity; x
// may differ), with only the blocks that own part of x:
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
// Both protocols give the same bits (the same rank-order f32 sum). Their
// waits are bounded, so that a rank whose peer never launches (it failed)
// does not spin forever: a wait ends early when the group's abort word
// (OneShotControl, in host memory mapped into every GPU) is set, or after
// kOneShotWaitSeconds, when it sets the timed-out word; either way x is left
// unspecified and the host reports the failure (status()).
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

// The largest message of the push protocol: each rank's buffer holds 12
// slots of this size per rank of the group (oneshot_push.cuh), 12 MiB a GPU
// with 2 ranks.
constexpr size_t kOneShotPushMaxBytes = size_t{512} << 10;

enum class OneShotProtocol {
  kPush,     // push + Lamport up to oneshot_push_capacity, larger ones kBarrier
  kBarrier,  // copy, per-block barrier, remote loads (every size)
};

// Bytes of one rank's peer buffer for messages of up to `capacity` bytes in
// a group of `ranks`.
size_t oneshot_buffer_bytes(size_t capacity, int ranks);

// The largest message (bytes) the push protocol takes for a buffer of
// `capacity` (OneShotParams::capacity): min(capacity, kOneShotPushMaxBytes).
size_t oneshot_push_capacity(size_t capacity);

// Enqueues on `stream` what a fresh peer buffer of oneshot_buffer_bytes
// (capacity, ranks) needs before the group's first launch: counters, flags
// and barrier data zeroed, the push stages filled with their sentinels.
cudaError_t init_oneshot_buffer(void* buffer, size_t capacity, int ranks, cudaStream_t stream);

struct OneShotParams {
  void* buffers[kOneShotMaxRanks] = {};  // every rank's peer buffer
  int size = 0;                          // ranks, 2..kOneShotMaxRanks
  int rank = 0;
  size_t capacity = 0;                // bytes of one data half
  DType dtype = DType::kBF16;         // f32, bf16 or f16
  void* x = nullptr;                  // [n] on this rank's GPU, reduced in place
  int64_t n = 0;                      // elements; n * dtype size <= capacity
  OneShotControl* control = nullptr;  // the group's (device address of the mapping)
  OneShotProtocol protocol = OneShotProtocol::kPush;  // the same on every rank
};

// Enqueues the all-reduce on `stream` (capturable). Every rank must launch it
// with matching parameters, or the ranks wait for each other until the group
// is aborted or kOneShotWaitSeconds pass.
cudaError_t launch_oneshot_all_reduce(const OneShotParams& p, cudaStream_t stream);

// The all-reduce fused with the residual add and RMSNorm that follow a
// row-parallel projection (Communicator::all_reduce_add_rms_norm), one launch
// on every rank with matching parameters:
//   x = sum over ranks of x (f32, rank order, rounded to the dtype);
//   residual = round(residual + x); out = rms_norm(residual) * w
// with the roundings of launch_rms_norm (norm_kernels.h), and its thread
// layout, so the result is bitwise what the one-shot all-reduce followed by
// launch_rms_norm gives (16-byte aligned tensors). Block b (of min(rows,
// kOneShotBlocks)) owns rows b, b + grid, ...: it writes them into its own
// region of every rank's buffer (the slot of the source rank; stores go out
// over NVLink, loads stay local), then (kBarrier) meets the ranks at its
// barrier or (kPush, when the rows fit the push stages' regions) polls its
// own regions until every rank's rows arrived, then sums its rows locally,
// adds, normalises and writes x, residual and out.
struct OneShotNormParams {
  OneShotParams group;           // buffers, size, rank, capacity, control; x / n unused
  DType dtype = DType::kBF16;    // f32, bf16 or f16 for every tensor
  void* x = nullptr;             // [rows, hidden] the rank's partial; left as the sum
  void* residual = nullptr;      // [rows, hidden] += the sum
  const void* weight = nullptr;  // [hidden]
  void* out = nullptr;           // [rows, hidden] (may not alias x or residual)
  int64_t rows = 0;
  int64_t hidden = 0;
  float eps = 1e-6f;
};

// Whether a [rows, hidden] message of `dtype` fits the fused kernel's
// per-block regions of a buffer of `capacity`-byte halves (rows take
// ceil(rows / min(rows, kOneShotBlocks)) rows of each block's
// capacity / kOneShotBlocks bytes). The same answer on every rank.
bool oneshot_norm_fits(int64_t rows, int64_t hidden, DType dtype, size_t capacity);

// Enqueues the fused kernel on `stream` (capturable); cudaErrorInvalidValue
// when the message does not fit or a parameter is out of range.
cudaError_t launch_oneshot_all_reduce_norm(const OneShotNormParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
