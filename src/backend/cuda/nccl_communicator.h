// Communicators over NCCL for CUDA backends whose ranks are threads of this
// process (one CudaBackend, one GPU and one thread per rank).
//
// all_reduce_sum (f32, bf16, f16) takes one of two paths, chosen by the
// message's size alone, so every rank of a group takes the same one:
//  - at most oneshot_max_bytes: the one-shot all-reduce over peer memory
//    (oneshot_all_reduce.h): one kernel, f32 accumulation in rank order, on
//    the push protocol up to oneshot_push_capacity (unless the group's
//    protocol is kBarrier), the barrier protocol above;
//  - larger (or when peer access is missing between some pair of GPUs, or
//    the group has more than 8 ranks): ncclAllReduce (sum, in the dtype).
// Both leave bitwise-identical results on every rank.
// all_reduce_add_rms_norm takes the one-shot path as one fused kernel
// (oneshot_all_reduce.h) when the message is within the threshold, has at
// most fused_norm_max_rows rows (backend/fused_norm_route.h: the fused kernel
// loses to the unfused pair on many rows) and fits the kernel's per-block
// regions; otherwise all_reduce_sum, then the backend's add_rms_norm (the
// same bits). send/recv are
// ncclSend/ncclRecv of the tensor's bytes. Everything is enqueued on the
// rank's backend stream and may be captured in a CUDA graph (all ranks
// capture the same sequence). NCCL sets up its connections on a size's first
// use: run each op once eagerly before capturing it (an engine warm-up does).
// A send's kernel waits on the device for the peer's matching recv: the peers
// must enqueue matching pairs in an order that cannot form a cycle of
// waiting sends (e.g. in a ring, even ranks send first, odd ranks receive
// first).
//
// NCCL is loaded at run time (nccl_library.h). NVLink multicast (NVLS) is
// turned off: NCCL_NVLS_ENABLE=0 is set in the environment before NCCL is
// initialised unless the variable is already set, because on shared
// machines a program using multicast can take the host's GPUs out of
// service; pagoda's all-reduces are small and gain nothing from it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backend/communicator.h"
#include "backend/cuda/oneshot_all_reduce.h"
#include "core/result.h"

namespace pagoda {

class CudaBackend;

// Messages of at most this many bytes take the one-shot path by default in a
// group of `ranks`: the largest power of two at which comm_bench measured the
// one-shot kernel ahead of NCCL on H100s (docs/parallelism.md): 4 MiB with
// 2 ranks, 512 KiB with 4; 256 KiB with more (not measured: each rank reads
// every other rank's buffer, so the crossover keeps falling).
int64_t default_oneshot_max_bytes(int ranks);
// The environment variable that overrides it: a byte size as
// core/byte_size.h reads it ("262144", "256KiB"; 0 turns the one-shot path
// off), at most kMaxOneShotBytes.
constexpr const char* kOneShotMaxBytesEnv = "PAGODA_ONESHOT_ALLREDUCE_BYTES";
constexpr int64_t kMaxOneShotBytes = int64_t{64} << 20;
// The one-shot kernels' protocol (oneshot_all_reduce.h): "push" (the
// default: push + Lamport up to oneshot_push_capacity, barrier above) or
// "barrier" (every size), for A/B timing; both give the same bits.
constexpr const char* kOneShotProtocolEnv = "PAGODA_ONESHOT";

struct NcclCommunicatorOptions {
  // Threshold of the one-shot path in bytes: -1 takes $PAGODA_ONESHOT_ALLREDUCE_BYTES
  // or else default_oneshot_max_bytes; 0 sends everything through NCCL.
  int64_t oneshot_max_bytes = -1;
  // The one-shot protocol; unset takes $PAGODA_ONESHOT, else kPush.
  std::optional<cuda::OneShotProtocol> oneshot_protocol;
  // Rows up to which all_reduce_add_rms_norm runs the fused kernel: -1 takes
  // $PAGODA_FUSED_NORM_MAX_ROWS or else kDefaultFusedNormMaxRows
  // (backend/fused_norm_route.h); 0 never fuses.
  int64_t fused_norm_max_rows = -1;
};

// One communicator per backend: rank i runs on backends[i], whose GPUs must
// be distinct. Created on the calling thread (ncclCommInitAll over the
// backends' devices; the calling thread's current device is kept). Each
// communicator is then driven by the thread that drives its backend (the
// backend's device current). The NCCL communicators and peer buffers are
// freed with the group's last communicator, which first waits for the
// group's GPUs to be idle.
//
// Teardown order: destroy the backends (whose destructors destroy their CUDA
// graphs) before the communicators. ncclCommDestroy waits until every graph
// that captured an op of the communicator is gone, so destroying the
// communicators while such a graph lives hangs. The communicators do not
// touch their backends once created, except to enqueue ops.
//
// abort() sets the one-shot kernels' abort word (they stop waiting for their
// peers), then ncclCommAbort()s every rank's comm (NCCL's kernels return);
// later ops do nothing, and the group's last communicator then skips
// ncclCommDestroy. A one-shot kernel that waited kOneShotWaitSeconds for a
// peer gives up too, and status() reports it.
//
// Fails (with what to install) when NCCL cannot be loaded, or when NCCL or
// the peer buffers' allocation fails.
Result<std::vector<std::unique_ptr<Communicator>>> create_nccl_communicators(
    const std::vector<CudaBackend*>& backends, const NcclCommunicatorOptions& options = {});

// The one-shot threshold that options resolve to in a group of `ranks`
// (validating the environment variable's value).
Result<int64_t> resolve_oneshot_max_bytes(const NcclCommunicatorOptions& options, int ranks);

// The one-shot protocol that options resolve to (validating $PAGODA_ONESHOT).
Result<cuda::OneShotProtocol> resolve_oneshot_protocol(const NcclCommunicatorOptions& options);

}  // namespace pagoda
