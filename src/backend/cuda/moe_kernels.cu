#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/moe_kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t work, int64_t per_block) {
  const int64_t blocks = ceil_div(work, per_block);
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

// One warp per token (kRouteTokensPerBlock per block): the lanes stride over
// the E logits for the max and the softmax sum (warp reductions), then make
// k picks, each a warp arg-max in the order (p descending, id ascending) over
// the experts not picked yet. Every lane computes p[e] = exp(l[e] - max) / sum
// with the same max and sum, so the picks are consistent across lanes.
// kPerLane > 0 (E <= 32 * kPerLane): each lane keeps its experts' p in
// registers and marks its picked ones; 0 (any E): p is recomputed in each
// pick, which takes the largest p strictly after the previous pick in that
// order (the same picks: the (p, id) pairs are distinct).
constexpr int kRouteTokensPerBlock = 4;
constexpr int kRoutePerLane = 8;  // E <= 256 in registers

// The warp's arg-max of (best_p, best) in the pick order (larger p, then
// lower id; -1 loses); the butterfly leaves the winner in every lane.
__device__ __forceinline__ void warp_argmax(int& best, float& best_p) {
  for (int o = 16; o > 0; o >>= 1) {
    const int other = __shfl_xor_sync(0xffffffffu, best, o);
    const float other_p = __shfl_xor_sync(0xffffffffu, best_p, o);
    if (other >= 0 && (best < 0 || other_p > best_p || (other_p == best_p && other < best))) {
      best = other;
      best_p = other_p;
    }
  }
}

template <int kPerLane>
__global__ void moe_route_kernel(MoeRouteParams p) {
  pdl_enter();
  const int lane = static_cast<int>(threadIdx.x) & 31;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteTokensPerBlock + (threadIdx.x >> 5);
       t < p.num_tokens; t += static_cast<int64_t>(gridDim.x) * kRouteTokensPerBlock) {
    const float* l = p.logits + t * p.num_experts;
    float max = -INFINITY;
    for (int e = lane; e < p.num_experts; e += 32) max = fmaxf(max, l[e]);
    max = warp_max(max);
    float sum = 0.0f;
    for (int e = lane; e < p.num_experts; e += 32) sum += expf(l[e] - max);
    sum = warp_sum(sum);
    int32_t* ids = p.ids + t * p.top_k;
    float* w = p.weights + t * p.top_k;
    float top_sum = 0.0f;
    if constexpr (kPerLane > 0) {
      float pr[kPerLane];  // this lane's experts lane + 32 i; -1: none, or picked
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + 32 * i;
        pr[i] = e < p.num_experts ? expf(l[e] - max) / sum : -1.0f;
      }
      for (int j = 0; j < p.top_k; ++j) {
        int best = -1;
        float best_p = 0.0f;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {  // ascending e: ties keep the lower id
          if (pr[i] >= 0.0f && (best < 0 || pr[i] > best_p)) {
            best = lane + 32 * i;
            best_p = pr[i];
          }
        }
        warp_argmax(best, best_p);
#pragma unroll
        for (int i = 0; i < kPerLane; ++i)
          if (lane + 32 * i == best) pr[i] = -1.0f;
        if (lane == 0) {
          ids[j] = best;
          w[j] = best_p;
        }
        top_sum += best_p;
      }
    } else {
      float prev_p = 0.0f;
      int prev_id = -1;
      for (int j = 0; j < p.top_k; ++j) {
        int best = -1;
        float best_p = 0.0f;
        for (int e = lane; e < p.num_experts; e += 32) {
          const float pe = expf(l[e] - max) / sum;
          const bool after_prev = prev_id < 0 || pe < prev_p || (pe == prev_p && e > prev_id);
          if (after_prev && (best < 0 || pe > best_p)) {  // ascending e: ties keep the lower id
            best = e;
            best_p = pe;
          }
        }
        warp_argmax(best, best_p);
        if (lane == 0) {
          ids[j] = best;
          w[j] = best_p;
        }
        top_sum += best_p;
        prev_p = best_p;
        prev_id = best;
      }
    }
    if (p.renormalize && lane == 0)
      for (int j = 0; j < p.top_k; ++j) w[j] /= top_sum;
  }
}

template <typename T>
__global__ void add_sigmoid_gated_kernel(SigmoidGatedAddParams p) {
  pdl_enter();
  for (int64_t r = blockIdx.x; r < p.num_rows; r += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + r * p.hidden;
    const T* w = static_cast<const T*>(p.gate_w);
    float dot = 0.0f;
    for (int64_t c = threadIdx.x; c < p.hidden; c += blockDim.x)
      dot += to_float(x[c]) * to_float(w[c]);
    const float s = 1.0f / (1.0f + expf(-block_sum(dot)));
    T* out = static_cast<T*>(p.out) + r * p.hidden;
    const T* y = static_cast<const T*>(p.y) + r * p.hidden;
    for (int64_t c = threadIdx.x; c < p.hidden; c += blockDim.x)
      out[c] = from_float<T>(to_float(out[c]) + s * to_float(y[c]));
  }
}

}  // namespace

cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return cudaSuccess;
  if (p.top_k < 1 || p.top_k > p.num_experts) return cudaErrorInvalidValue;
  const unsigned grid = grid_for(p.num_tokens, kRouteTokensPerBlock);
  if (p.num_experts <= 32 * kRoutePerLane)
    launch_kernel(moe_route_kernel<kRoutePerLane>, grid, kRouteTokensPerBlock * 32, 0, stream, p);
  else
    launch_kernel(moe_route_kernel<0>, grid, kRouteTokensPerBlock * 32, 0, stream, p);
  return cudaGetLastError();
}

cudaError_t launch_moe_experts(const MoeExpertsParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return cudaSuccess;
  if (p.num_experts < 1 || p.num_experts > kMoeMaxExperts || p.top_k < 1)
    return cudaErrorInvalidValue;
  if (p.num_tokens <= kMoeDecodeMaxTokens && p.num_tokens * p.top_k <= kMoeDecodeMaxSlots)
    return p.decode_v1 ? launch_moe_experts_decode_v1(p, stream)
                       : launch_moe_experts_decode_v2(p, stream);
  return launch_moe_experts_grouped(p, stream);
}

cudaError_t launch_add_sigmoid_gated(const SigmoidGatedAddParams& p, cudaStream_t stream) {
  if (p.num_rows == 0 || p.hidden == 0) return cudaSuccess;
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const unsigned grid = static_cast<unsigned>(p.num_rows < 65536 ? p.num_rows : 65536);
    launch_kernel(add_sigmoid_gated_kernel<T>, grid, kThreads, 0, stream, p);
    return cudaGetLastError();
  });
}

}  // namespace pagoda::cuda
