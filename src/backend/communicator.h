// Communicator: one rank's end of a group of ranks that exchange tensors
// (tensor parallelism: the all-reduce after each row-parallel projection;
// pipeline parallelism: the hidden states handed from one stage to the next).
//
// Contract shared by every implementation (cpu threads: parallel/
// cpu_communicator.h; NCCL: backend/cuda/nccl_communicator.h):
//  - One Communicator per rank; ranks are 0..size()-1. Every rank of the group
//    calls the same collectives in the same order with tensors of the same
//    shape and dtype (send/recv: the two peers call matching pairs in the
//    same order).
//  - Tensors live on the rank's backend (the backend the communicator was
//    created for) and are contiguous, in f32, bf16 or f16.
//  - Ops are ordered with that backend's ops: on cuda they are enqueued on its
//    stream and may be captured in a CUDA graph (all ranks capture the same
//    sequence); on the cpu they run when called and return once done, so the
//    ranks must call from different threads.
//  - A failure is kept (the first one) and reported by status(); the op then
//    does nothing.
//  - abort() ends the whole group: a rank that failed alone (e.g. out of
//    memory before a collective its peers already wait in) aborts, so that no
//    peer waits for it forever.
#pragma once

#include <string>

#include "core/result.h"
#include "core/tensor.h"

namespace pagoda {

class Backend;  // backend/backend.h

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // For logs, e.g. "cpu threads", "nccl 2.28.9".
  virtual std::string name() const = 0;

  // x = the elementwise sum of x over all ranks, in place. Every rank ends
  // with bitwise the same values (the sum is taken in one order for all).
  virtual void all_reduce_sum(Tensor& x) = 0;

  // The all-reduce of a row-parallel output fused with what follows it in a
  // decoder (TensorRT-LLM's allreduce + residual + RMSNorm): exactly
  //   all_reduce_sum(x); backend.add_rms_norm(residual, x, w, eps, out);
  // x, residual, out [T, H] and w [H] in the compute dtype; `backend` is the
  // rank's backend (the one this communicator was created for). Every rank
  // ends with bitwise the same x, residual and out. This default runs the
  // two ops; an implementation may run them as one kernel (nccl: the one-
  // shot path) with the same roundings.
  virtual void all_reduce_add_rms_norm(Backend& backend, Tensor& x, Tensor& residual,
                                       const Tensor& w, float eps, Tensor& out);

  // Gathers column blocks (the vocab-parallel lm_head's logits): x [R, C] on
  // every rank (same R, C and dtype), out [R, W] with W <= size() C; rank
  // j's x[:, c] lands in out[:, j C + c] for every j C + c < W (columns past
  // W, the padding of the last ranks' blocks, are dropped). Every rank ends
  // with the same out, bit for bit.
  virtual void all_gather_columns(const Tensor& x, Tensor& out) = 0;
  // Hands x to rank `peer`, whose matching recv() fills its tensor of the same
  // shape and dtype.
  virtual void send(const Tensor& x, int peer) = 0;
  virtual void recv(Tensor& x, int peer) = 0;

  // The first failure since creation; ok while every op succeeded.
  virtual Status status() const { return {}; }

  // Aborts the whole group, from any thread, even while ops are in flight:
  // every op of every rank of the group that is waiting for a peer returns
  // at once, and every later op returns at once doing nothing (a tensor an op
  // would have written is left unspecified). Afterwards status() reports
  // "aborted: <why>" on every rank of the group (a rank that had failed
  // before keeps its own first failure). Calling it again does nothing; the
  // group cannot be used again, only destroyed.
  virtual void abort(const std::string& why) = 0;
};

}  // namespace pagoda
