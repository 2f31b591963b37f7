#include "backend/cuda/activation_kernels.h"

#include <type_traits>

#include "backend/cuda/cluster_reduce.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_quant.cuh"
#include "backend/cuda/glu_fp8_split.h"
#include "backend/cuda/head_ops.cuh"
#include "backend/cuda/kernel_launch.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t work) {
  const int64_t blocks = ceil_div(work, kThreads);
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

// Grid-stride over (row, kVec-wide column group).
template <typename T, int kVec, GluActivation kAct>
__global__ void silu_mul_kernel(SiluMulParams p) {
  pdl_enter();
  const int64_t groups = p.inter / kVec;
  const int64_t total = p.num_rows * groups;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / groups;
    const int64_t c = (idx % groups) * kVec;
    const T* gate = static_cast<const T*>(p.gate_up) + r * 2 * p.inter + c;
    const Vec<T, kVec> g = load_vec<T, kVec>(gate);
    const Vec<T, kVec> u = load_vec<T, kVec>(gate + p.inter);
    Vec<T, kVec> o;
#pragma unroll
    for (int j = 0; j < kVec; ++j) o.v[j] = glu_one<T, kAct>(g.v[j], u.v[j]);
    store_vec<T, kVec>(static_cast<T*>(p.out) + r * p.inter + c, o);
  }
}

// glu_fp8_wide_kernel's most threads a CTA (one CTA a row).
constexpr int kWideThreads = 1024;

// silu_mul_kernel's values plus the row's FP8 codes, one token's row split
// over the CTAs of a thread-block cluster (grid: num_rows * cluster CTAs
// along x, cluster = gridDim.x / num_rows consecutive CTAs; 1 = a plain
// launch). Thread t of the CTA of rank c owns the vectors
// i = (k * cluster + c) * blockDim.x + t (k < kGluMaxVecs, i < groups): it
// issues all its gate / up loads before any math, stores its outputs, and
// after the cluster's max |out| (cluster_max: the same max as one CTA over
// the row, so the scale and codes are launch_fp8_quantize's of the stored
// output bit for bit) writes their codes from the same registers.
template <typename T, int kVec, GluActivation kAct>
__global__ void __launch_bounds__(kGluMaxRowThreads) glu_fp8_kernel(SiluMulParams p) {
  pdl_enter();
  const unsigned cluster = gridDim.x / static_cast<unsigned>(p.num_rows);
  const int64_t row = blockIdx.x / cluster;
  const unsigned rank = blockIdx.x % cluster;
  const int64_t groups = p.inter / kVec;
  const T* gate = static_cast<const T*>(p.gate_up) + row * 2 * p.inter;
  T* out = static_cast<T*>(p.out) + row * p.inter;
  auto index = [&](int k) {
    return (static_cast<int64_t>(k) * cluster + rank) * blockDim.x + threadIdx.x;
  };
  Vec<T, kVec> g[kGluMaxVecs], u[kGluMaxVecs];
#pragma unroll
  for (int k = 0; k < kGluMaxVecs; ++k) {
    const int64_t i = index(k);
    if (i < groups) {
      g[k] = load_vec<T, kVec>(gate + i * kVec);
      u[k] = load_vec<T, kVec>(gate + p.inter + i * kVec);
    }
  }
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kGluMaxVecs; ++k) {
    const int64_t i = index(k);
    if (i >= groups) continue;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      g[k].v[j] = glu_one<T, kAct>(g[k].v[j], u[k].v[j]);
      amax = fmaxf(amax, fabsf(to_float(g[k].v[j])));
    }
    store_vec<T, kVec>(out + i * kVec, g[k]);
  }
  const float s = fp8_token_scale_dev(cluster_max(amax));
  if (rank == 0 && threadIdx.x == 0) p.scales[row] = s;
  uint8_t* codes = p.codes + row * p.inter;
#pragma unroll
  for (int k = 0; k < kGluMaxVecs; ++k) {
    const int64_t i = index(k);
    if (i < groups) store_codes<T, kVec>(g[k], s, codes + i * kVec);
  }
  cluster_reduce_done();
}

// glu_fp8_kernel for rows wider than a cluster's registers hold, one CTA per
// row: pass 1 writes the outputs and takes max|out| of the rounded values;
// pass 2 re-reads the thread's own outputs and writes their codes.
template <typename T, int kVec, GluActivation kAct>
__global__ void glu_fp8_wide_kernel(SiluMulParams p) {
  pdl_enter();
  const int64_t row = blockIdx.x;
  const int64_t groups = p.inter / kVec;
  const T* gate = static_cast<const T*>(p.gate_up) + row * 2 * p.inter;
  T* out = static_cast<T*>(p.out) + row * p.inter;
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < groups; i += blockDim.x) {
    const Vec<T, kVec> g = load_vec<T, kVec>(gate + i * kVec);
    const Vec<T, kVec> u = load_vec<T, kVec>(gate + p.inter + i * kVec);
    Vec<T, kVec> o;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      o.v[j] = glu_one<T, kAct>(g.v[j], u.v[j]);
      amax = fmaxf(amax, fabsf(to_float(o.v[j])));
    }
    store_vec<T, kVec>(out + i * kVec, o);
  }
  const float s = fp8_token_scale_dev(block_max(amax));
  if (threadIdx.x == 0) p.scales[row] = s;
  store_row_codes<T, kVec>(out, groups, s, p.codes + row * p.inter);
}

template <typename O, typename B>
__global__ void bias_add_kernel(BiasAddParams p) {
  pdl_enter();
  const int64_t total = p.num_rows * p.num_cols;
  O* out = static_cast<O*>(p.out);
  const B* bias = static_cast<const B*>(p.bias);
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[idx] = from_float<O>(to_float(out[idx]) + to_float(bias[idx % p.num_cols]));
  }
}

template <typename T>
__global__ void scale_kernel(ScaleParams p) {
  pdl_enter();
  T* x = static_cast<T*>(p.x);
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < p.n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = to_float(x[idx]);
    x[idx] = from_float<T>(p.softcap > 0.0f ? tanhf(v / p.softcap) * p.softcap : v * p.scale);
  }
}

template <typename O>
cudaError_t launch_bias_add_out(const BiasAddParams& p, cudaStream_t stream) {
  const unsigned grid = grid_for(p.num_rows * p.num_cols);
  switch (p.bias_dtype) {
    case DType::kF32: launch_kernel(bias_add_kernel<O, float>, grid, kThreads, 0, stream, p); break;
    case DType::kBF16: launch_kernel(bias_add_kernel<O, bf16>, grid, kThreads, 0, stream, p); break;
    case DType::kF16: launch_kernel(bias_add_kernel<O, f16>, grid, kThreads, 0, stream, p); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_silu_mul(const SiluMulParams& p, cudaStream_t stream) {
  if (p.num_rows == 0 || p.inter == 0) return cudaSuccess;
  const bool fp8 = p.codes != nullptr;
  if (fp8 != (p.scales != nullptr) || (fp8 && p.num_rows * kGluMaxClusterCtas > 0x7fffffff))
    return cudaErrorInvalidValue;
  const bool vec8 = p.inter % 8 == 0 && is_aligned(p.gate_up, 16) && is_aligned(p.out, 16) &&
                    (!fp8 || is_aligned(p.codes, 8));
  const unsigned grid = grid_for(p.num_rows * (vec8 ? p.inter / 8 : p.inter));
  return dispatch_half(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr auto kSilu = GluActivation::kSilu, kGelu = GluActivation::kGeluTanh;
    const bool gelu = p.act == kGelu;
    if (fp8) {  // a row over a cluster of CTAs, or one CTA of up to 1024 threads
      const int64_t groups = vec8 ? p.inter / 8 : p.inter;
      const GluFp8Split split = glu_fp8_split(p.num_rows, groups);
      auto launch = [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        if (split.threads > 0) {
          launch_kernel_cluster(
              gelu ? glu_fp8_kernel<T, kVec, kGelu> : glu_fp8_kernel<T, kVec, kSilu>,
              static_cast<unsigned>(p.num_rows * split.cluster), split.threads,
              static_cast<unsigned>(split.cluster), 0, stream, p);
        } else {
          const int threads =
              static_cast<int>(groups >= kWideThreads ? kWideThreads : ceil_div(groups, 32) * 32);
          launch_kernel(
              gelu ? glu_fp8_wide_kernel<T, kVec, kGelu> : glu_fp8_wide_kernel<T, kVec, kSilu>,
              static_cast<unsigned>(p.num_rows), threads, 0, stream, p);
        }
      };
      if (vec8) {
        launch(std::integral_constant<int, 8>());
      } else {
        launch(std::integral_constant<int, 1>());
      }
    } else if (vec8) {
      launch_kernel(gelu ? silu_mul_kernel<T, 8, kGelu> : silu_mul_kernel<T, 8, kSilu>, grid,
                    kThreads, 0, stream, p);
    } else {
      launch_kernel(gelu ? silu_mul_kernel<T, 1, kGelu> : silu_mul_kernel<T, 1, kSilu>, grid,
                    kThreads, 0, stream, p);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_bias_add(const BiasAddParams& p, cudaStream_t stream) {
  if (p.num_rows == 0 || p.num_cols == 0) return cudaSuccess;
  switch (p.out_dtype) {
    case DType::kF32: return launch_bias_add_out<float>(p, stream);
    case DType::kBF16: return launch_bias_add_out<bf16>(p, stream);
    case DType::kF16: return launch_bias_add_out<f16>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_scale(const ScaleParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  const unsigned grid = grid_for(p.n);
  switch (p.dtype) {
    case DType::kF32: launch_kernel(scale_kernel<float>, grid, kThreads, 0, stream, p); break;
    case DType::kBF16: launch_kernel(scale_kernel<bf16>, grid, kThreads, 0, stream, p); break;
    case DType::kF16: launch_kernel(scale_kernel<f16>, grid, kThreads, 0, stream, p); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
