// Mixture-of-experts kernels: routing (softmax, top-k, renormalisation),
// the routed experts' SwiGLU MLPs, and the sigmoid-gated add of a shared
// expert. launch_moe_experts picks one of two fused paths by token count;
// both read the routing on the device only (graph-safe, no host sync):
//
// - decode (<= kMoeDecodeMaxTokens tokens, <= kMoeDecodeMaxSlots routed
//   (token, k) slots; moe_decode_v2.cu, or moe_decode.cu's v1 kernels with
//   MoeExpertsParams::decode_v1): two launches. gate_up: a warp per (distinct
//   selected expert, output n) streams one gate row and its up row with
//   16-byte loads once and dots them with every token routed to that expert,
//   silu_mul in the epilogue -> act [T*k, I]. down: a block per tile of
//   hidden outputs streams those rows of every selected expert once, keeps
//   the per-slot dots in shared memory and sums weight * dot over each token's
//   k slots in slot order (f32, one rounding). v2 runs one wave of resident
//   blocks that loop over that work; v1 a block per 8 (gate_up) or 4 (down)
//   outputs. Both give the same bits.
// - grouped (everything else; moe_grouped.cu): four launches. A one-block
//   counting sort groups the slots by expert (prefix sums into buffers sized
//   by T*k) and lists 64-row tiles of each expert's segment; a grouped
//   tensor-core GEMM (mma.sync m16n8k16, f32 accumulation, cp.async pipeline)
//   per projection over (tile, output columns): gate_up with silu_mul fused,
//   down writing weight * dot per slot as f32 rows; then a reduce over each
//   token's k rows in slot order, one rounding.
//
// Both are deterministic (no float atomics; the order of slots within an
// expert's segment does not change any value: every row is computed alone).
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

// launch_moe_experts takes the decode path within both limits.
constexpr int64_t kMoeDecodeMaxTokens = 16;
constexpr int64_t kMoeDecodeMaxSlots = 128;

struct MoeExpertsParams {
  DType dtype = DType::kBF16;      // of x, the weights, act_scratch and out
  const void* x = nullptr;         // [num_tokens, hidden]
  const void* gate_up = nullptr;   // [num_experts, 2 inter, hidden]
  const void* down = nullptr;      // [num_experts, hidden, inter]
  const int32_t* ids = nullptr;    // [num_tokens, top_k]
  const float* weights = nullptr;  // [num_tokens, top_k]
  void* scratch = nullptr;         // scratch_bytes, 16-byte aligned
  int64_t scratch_bytes = 0;       // >= moe_experts_scratch_bytes(T * top_k, hidden, E)
  void* act_scratch = nullptr;     // [num_tokens * top_k, inter]
  void* out = nullptr;             // [num_tokens, hidden]
  int64_t num_tokens = 0;
  int64_t hidden = 0;
  int64_t inter = 0;
  int num_experts = 0;
  int top_k = 0;
  bool decode_v1 = false;  // the decode path on the v1 kernels (PAGODA_MOE_DECODE=v1, for A/B)
};

// Bytes of `scratch` the grouped path uses for `slots` = T*k routed rows:
// f32 down rows [slots, hidden], the expert-sorted slot order and the tile
// list, each part 16-byte aligned (the decode path uses none of it).
int64_t moe_experts_scratch_bytes(int64_t slots, int64_t hidden, int num_experts);

// The grouped path's sort keeps two counters per expert in 32 KiB of shared memory.
constexpr int kMoeMaxExperts = 4096;

// backend.h's moe_experts: out[t] = sum_j weights[t,j] * down_e(silu(g) * u).
// Expert ids outside [0, num_experts) contribute nothing. num_experts above
// kMoeMaxExperts, a grid past CUDA's limits, or a scratch smaller than
// moe_experts_scratch_bytes on the grouped path: cudaErrorInvalidValue.
cudaError_t launch_moe_experts(const MoeExpertsParams& p, cudaStream_t stream);

// The paths (moe_decode_v2.cu, moe_decode.cu, moe_grouped.cu); launch_moe_experts picks.
cudaError_t launch_moe_experts_decode_v2(const MoeExpertsParams& p, cudaStream_t stream);
cudaError_t launch_moe_experts_decode_v1(const MoeExpertsParams& p, cudaStream_t stream);
cudaError_t launch_moe_experts_grouped(const MoeExpertsParams& p, cudaStream_t stream);

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
