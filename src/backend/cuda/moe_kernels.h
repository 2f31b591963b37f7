// Mixture-of-experts kernels: routing (softmax, top-k, renormalisation) and
// the routed experts' SwiGLU MLPs, plus the sigmoid-gated add of a shared
// expert. The expert path is a correct, graph-safe, non-fused one: a
// warp-per-output dot product over each token's k routed experts (gate_up,
// then silu_mul, then down with the routing weights summed in f32); the
// routing ids stay on the device, so nothing depends on host data. The
// fused sorted grouped GEMM is later work.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

struct MoeRouteParams {
  const float* logits = nullptr;  // [num_tokens, num_experts]
  int32_t* ids = nullptr;         // [num_tokens, top_k]
  float* weights = nullptr;       // [num_tokens, top_k]
  int64_t num_tokens = 0;
  int num_experts = 0;
  int top_k = 0;  // 1..num_experts
  bool renormalize = false;
};

// backend.h's moe_route: top-k of softmax(logits) per row, decreasing,
// ties to the lower expert id; weights / their sum with `renormalize`.
cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t stream);

struct MoeExpertsParams {
  DType dtype = DType::kBF16;       // of x, the weights, the scratch and out
  const void* x = nullptr;          // [num_tokens, hidden]
  const void* gate_up = nullptr;    // [num_experts, 2 inter, hidden]
  const void* down = nullptr;       // [num_experts, hidden, inter]
  const int32_t* ids = nullptr;     // [num_tokens, top_k]
  const float* weights = nullptr;   // [num_tokens, top_k]
  void* gate_up_scratch = nullptr;  // [num_tokens * top_k, 2 inter]
  void* act_scratch = nullptr;      // [num_tokens * top_k, inter]
  void* out = nullptr;              // [num_tokens, hidden]
  int64_t num_tokens = 0;
  int64_t hidden = 0;
  int64_t inter = 0;
  int num_experts = 0;
  int top_k = 0;
};

// backend.h's moe_experts: out[t] = sum_j weights[t,j] * down_e(silu(g) * u).
// Expert ids outside [0, num_experts) contribute nothing.
cudaError_t launch_moe_experts(const MoeExpertsParams& p, cudaStream_t stream);

struct SigmoidGatedAddParams {
  DType dtype = DType::kBF16;    // of out, y, x and gate_w
  void* out = nullptr;           // [num_rows, hidden], in place
  const void* y = nullptr;       // [num_rows, hidden]
  const void* x = nullptr;       // [num_rows, hidden]
  const void* gate_w = nullptr;  // [hidden]
  int64_t num_rows = 0;
  int64_t hidden = 0;
};

// out[r, c] = round(out[r, c] + sigmoid(dot(x[r], gate_w)) * y[r, c]) in
// f32; a block per row.
cudaError_t launch_add_sigmoid_gated(const SigmoidGatedAddParams& p, cudaStream_t stream);

}  // namespace pagoda::cuda
