// Skinny products (see gemv_kernels.h). A warp owns kRowsPerWarp rows of w
// (outputs) and walks k in 16-byte chunks, lane l taking chunks l, l + 32,
// ...; each lane issues kUnroll chunk loads per weight row before using any,
// so a warp keeps kRowsPerWarp * kUnroll * 512 bytes of weights in flight.
// Weights are streamed past L1 (each is read once); the few x rows stay in
// L1/L2 and are shared by the warp's weight rows. Partial sums are reduced
// across the warp at the end.
#include "backend/cuda/gemv_kernels.h"

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/stream_load.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 2;
constexpr int kUnroll = 4;

__device__ __forceinline__ float2 unpack2(uint32_t v, bf16) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}
__device__ __forceinline__ float2 unpack2(uint32_t v, f16) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}

template <typename T>
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = unpack2(u[i], T{});
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

template <typename T>
__device__ __forceinline__ float dot8(const uint4& w, const float (&x)[8], float acc) {
  float wf[8];
  unpack8<T>(w, wf);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = fmaf(wf[i], x[i], acc);
  return acc;
}

template <typename T, int kRows>
__global__ void __launch_bounds__(kThreads) gemv_kernel(GemvParams p) {
  pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t n0 =
      (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  if (n0 >= p.n) return;
  const int64_t chunks = p.k / 8;
  const T* x = static_cast<const T*>(p.x);
  const T* w[kRowsPerWarp];
  bool row_ok[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    row_ok[r] = n0 + r < p.n;
    w[r] = static_cast<const T*>(p.w) + (row_ok[r] ? n0 + r : n0) * p.k;
  }
  float acc[kRows][kRowsPerWarp] = {};
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
    uint4 wv[kUnroll][kRowsPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        wv[u][r] = c < chunks && row_ok[r] ? load_stream(w[r] + c * 8) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= chunks) break;
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        float xf[8];
        unpack8<T>(__ldg(reinterpret_cast<const uint4*>(x + m * p.k + c * 8)), xf);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) acc[m][r] = dot8<T>(wv[u][r], xf, acc[m][r]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float v = warp_sum(acc[m][r]);
      if (lane == m * kRowsPerWarp + r && row_ok[r]) {
        const int64_t j = n0 + r;
        if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, j);
        const int64_t o = m * p.n + j;
        if (p.out_dtype == DType::kF32) {
          static_cast<float*>(p.out)[o] = v;
        } else {
          static_cast<T*>(p.out)[o] = from_float<T>(v);
        }
      }
    }
  }
}

template <typename T>
cudaError_t launch_rows(const GemvParams& p, cudaStream_t stream) {
  const int64_t blocks = ceil_div(p.n, kWarps * kRowsPerWarp);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks));
  switch (p.rows) {
    case 1: launch_kernel(gemv_kernel<T, 1>, grid, kThreads, 0, stream, p); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

static_assert(kGemvMaxRows * kRowsPerWarp <= 32, "one writing lane per output");

bool gemv_supports(const GemvParams& p) {
  const bool in_ok = p.dtype == DType::kBF16 || p.dtype == DType::kF16;
  const bool out_ok = p.out_dtype == p.dtype || p.out_dtype == DType::kF32;
  const bool bias_ok = p.bias == nullptr || p.bias_dtype == DType::kF32 ||
                       p.bias_dtype == DType::kBF16 || p.bias_dtype == DType::kF16;
  return in_ok && out_ok && bias_ok && p.rows >= 1 && p.rows <= kGemvMaxRows && p.n > 0 &&
         p.k > 0 && p.k % 8 == 0 && is_aligned(p.x, 16) && is_aligned(p.w, 16);
}

cudaError_t launch_gemv(const GemvParams& p, cudaStream_t stream) {
  if (!gemv_supports(p)) return cudaErrorInvalidValue;
  return dispatch_half(p.dtype, [&](auto tag) { return launch_rows<decltype(tag)>(p, stream); });
}

}  // namespace pagoda::cuda
