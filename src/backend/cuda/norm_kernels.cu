#include "backend/cuda/norm_kernels.h"

#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_quant.cuh"
#include "backend/cuda/head_ops.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

// Most kVec-wide vectors of a row that a thread keeps in registers: rows of
// up to 1024 * kMaxVecs * kVec elements take rms_norm_kernel (the 8B to 70B
// hidden sizes, 4096 and 8192: one vector a thread), wider ones
// rms_norm_wide_kernel.
constexpr int kMaxVecs = 2;
constexpr int kMaxThreads = 1024;

// One block per row. Thread t owns the vectors i = t + k * blockDim.x
// (k < kMaxVecs, i < num_vec) and keeps them in registers: it issues all its
// loads (x, residual, weight) before any math, adds and stores the residual,
// sums squares in the order of k then j (the order of rms_norm_wide_kernel,
// so the sums and outputs are the same bit for bit), and writes its outputs
// and, kFp8, their e4m3 codes with the row's scale from the same registers.
template <typename T, int kVec, bool kFp8>
__global__ void __launch_bounds__(kMaxThreads) rms_norm_kernel(RmsNormParams p) {
  pdl_enter();
  const int64_t row = blockIdx.x;
  const int num_vec = static_cast<int>(p.hidden / kVec);
  const T* x = static_cast<const T*>(p.x) + row * p.hidden;
  T* res = p.residual ? static_cast<T*>(p.residual) + row * p.hidden : nullptr;
  const T* w = static_cast<const T*>(p.weight);
  T* out = static_cast<T*>(p.out) + row * p.hidden;

  Vec<T, kVec> v[kMaxVecs], r[kMaxVecs], wv[kMaxVecs];
#pragma unroll
  for (int k = 0; k < kMaxVecs; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < num_vec) {
      v[k] = load_vec<T, kVec>(x + i * kVec);
      if (res != nullptr) r[k] = load_vec<T, kVec>(res + i * kVec);
      wv[k] = load_vec<T, kVec>(w + i * kVec);
    }
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxVecs; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i >= num_vec) continue;
    if (res != nullptr) {
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        v[k].v[j] = from_float<T>(to_float(r[k].v[j]) + to_float(v[k].v[j]));
      store_vec<T, kVec>(res + i * kVec, v[k]);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float f = to_float(v[k].v[j]);
      sum_sq += f * f;
    }
  }
  sum_sq = block_sum(sum_sq);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);

  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxVecs; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i >= num_vec) continue;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      v[k].v[j] = norm_apply<T>(to_float(v[k].v[j]), inv, wv[k].v[j]);
      if constexpr (kFp8) amax = fmaxf(amax, fabsf(to_float(v[k].v[j])));
    }
    store_vec<T, kVec>(out + i * kVec, v[k]);
  }
  if constexpr (kFp8) {
    const float s = fp8_token_scale_dev(block_max(amax));
    if (threadIdx.x == 0) p.scales[row] = s;
    uint8_t* codes = p.codes + row * p.hidden;
#pragma unroll
    for (int k = 0; k < kMaxVecs; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < num_vec) store_codes<T, kVec>(v[k], s, codes + i * kVec);
    }
  }
}

// rms_norm_kernel for rows wider than its registers hold: pass 1
// (optionally) updates the residual and sums squares; pass 2 re-reads the
// row (the same thread's own elements) and writes the output. kFp8: pass 2
// also takes max|out| of the rounded outputs, and pass 3 re-reads the
// thread's own outputs and writes their e4m3 codes with the row's scale.
template <typename T, int kVec, bool kFp8>
__global__ void rms_norm_wide_kernel(RmsNormParams p) {
  pdl_enter();
  const int64_t row = blockIdx.x;
  const int64_t num_vec = p.hidden / kVec;
  const T* x = static_cast<const T*>(p.x) + row * p.hidden;
  T* res = p.residual ? static_cast<T*>(p.residual) + row * p.hidden : nullptr;
  const T* w = static_cast<const T*>(p.weight);
  T* out = static_cast<T*>(p.out) + row * p.hidden;

  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < num_vec; i += blockDim.x) {
    Vec<T, kVec> v = load_vec<T, kVec>(x + i * kVec);
    if (res != nullptr) {
      Vec<T, kVec> r = load_vec<T, kVec>(res + i * kVec);
#pragma unroll
      for (int j = 0; j < kVec; ++j) r.v[j] = from_float<T>(to_float(r.v[j]) + to_float(v.v[j]));
      store_vec<T, kVec>(res + i * kVec, r);
      v = r;
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float f = to_float(v.v[j]);
      sum_sq += f * f;
    }
  }
  sum_sq = block_sum(sum_sq);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);

  const T* src = res != nullptr ? res : x;
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < num_vec; i += blockDim.x) {
    const Vec<T, kVec> v = load_vec<T, kVec>(src + i * kVec);
    const Vec<T, kVec> wv = load_vec<T, kVec>(w + i * kVec);
    Vec<T, kVec> o;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      o.v[j] = norm_apply<T>(to_float(v.v[j]), inv, wv.v[j]);
      if constexpr (kFp8) amax = fmaxf(amax, fabsf(to_float(o.v[j])));
    }
    store_vec<T, kVec>(out + i * kVec, o);
  }
  if constexpr (kFp8) {
    const float s = fp8_token_scale_dev(block_max(amax));
    if (threadIdx.x == 0) p.scales[row] = s;
    store_row_codes<T, kVec>(out, num_vec, s, p.codes + row * p.hidden);
  }
}

// One warp per (token, head); a lane caches up to 8 elements (head_dim <= 256).
template <typename T>
__global__ void qk_norm_kernel(QkNormParams p) {
  pdl_enter();
  constexpr int kMaxPerLane = 8;
  const int num_heads = p.num_q_heads + p.num_kv_heads;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (item >= p.num_tokens * num_heads) return;
  const int lane = threadIdx.x & 31;
  const int64_t t = item / num_heads;
  const int h = static_cast<int>(item % num_heads);
  T* head = static_cast<T*>(p.qkv) + t * p.row_width + static_cast<int64_t>(h) * p.head_dim;
  const T* w = static_cast<const T*>(h < p.num_q_heads ? p.q_weight : p.k_weight);

  float vals[kMaxPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int d = lane + 32 * k;
    vals[k] = d < p.head_dim ? to_float(head[d]) : 0.0f;
  }
  const float inv = head_rms_inv(vals, p.head_dim, p.eps);
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < p.head_dim) head[d] = norm_apply<T>(vals[k], inv, w[d]);
  }
}

}  // namespace

cudaError_t launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  if (p.hidden <= 0 || p.num_rows > 0x7fffffff) return cudaErrorInvalidValue;
  const bool vec8 = p.hidden % 8 == 0 && is_aligned(p.x, 16) && is_aligned(p.weight, 16) &&
                    is_aligned(p.out, 16) && (p.residual == nullptr || is_aligned(p.residual, 16)) &&
                    (p.codes == nullptr || is_aligned(p.codes, 8));
  const int64_t num_vec = vec8 ? p.hidden / 8 : p.hidden;
  const int threads =
      static_cast<int>(num_vec >= kMaxThreads ? kMaxThreads : ceil_div(num_vec, 32) * 32);
  const bool in_registers = num_vec <= int64_t{kMaxThreads} * kMaxVecs;
  const unsigned blocks = static_cast<unsigned>(p.num_rows);
  const bool fp8 = p.codes != nullptr;
  if (fp8 != (p.scales != nullptr)) return cudaErrorInvalidValue;
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto launch = [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      if (in_registers) {
        launch_kernel(fp8 ? rms_norm_kernel<T, kVec, true> : rms_norm_kernel<T, kVec, false>,
                      blocks, threads, 0, stream, p);
      } else {
        launch_kernel(
            fp8 ? rms_norm_wide_kernel<T, kVec, true> : rms_norm_wide_kernel<T, kVec, false>,
            blocks, threads, 0, stream, p);
      }
    };
    if (vec8) {
      launch(std::integral_constant<int, 8>());
    } else {
      launch(std::integral_constant<int, 1>());
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_qk_norm(const QkNormParams& p, cudaStream_t stream) {
  const int64_t items = p.num_tokens * (p.num_q_heads + p.num_kv_heads);
  if (items == 0) return cudaSuccess;
  if (p.head_dim <= 0 || p.head_dim > 256) return cudaErrorInvalidValue;
  constexpr int kWarpsPerBlock = 8;
  const int64_t blocks = ceil_div(items, kWarpsPerBlock);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    return launch_kernel(qk_norm_kernel<T>, static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0,
                         stream, p);
  });
}

}  // namespace pagoda::cuda
