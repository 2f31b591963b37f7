// Device helpers shared by the FP8 linear kernels (fp8_linear_kernels.h):
// the weight's streaming load, 16 codes to f32 (exact) and the e4m3
// tensor-core product (mma.sync m16n8k32 e4m3 x e4m3 -> f32, sm_89+).
// Included only by .cu files of backend/cuda.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/stream_load.cuh"

namespace pagoda::cuda {

// The 16 e4m3 codes of v (byte 0 of v.x first) as f32: e4m3 -> f16 is exact.
__device__ __forceinline__ void unpack16(const uint4& v, float (&f)[16]) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>(u[i] >> (16 * j));
      const float2 t = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
      f[4 * i + 2 * j] = t.x;
      f[4 * i + 2 * j + 1] = t.y;
    }
  }
}

// d += a (16 x 32 e4m3, row-major) * b (32 x 8 e4m3, column-major), f32.
// Fragments (PTX ISA, mma.m16n8k32, 8-bit types), lane = 4 g + q: a0 holds
// A[g][4q .. 4q + 3], a1 A[g + 8][4q ..], a2 A[g][16 + 4q ..], a3
// A[g + 8][16 + 4q ..]; b0 B[4q .. 4q + 3][g], b1 B[16 + 4q ..][g]; d0, d1
// D[g][2q], D[g][2q + 1]; d2, d3 the same of row g + 8. Byte 0 of a register
// is its lowest-numbered element.
__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// d += the product over 64 columns of 16 rows of A (row-major) and 8 rows of
// B^T (both e4m3, the same 64 columns), as two mmas fed from one 16-byte run
// of columns per lane and row: lane 4 g + q passes lo = A[g][16q .. 16q + 15],
// hi = A[g + 8][16q .. 16q + 15] and b = B^T[g][16q .. 16q + 15]. The dot
// product does not depend on the order of its columns, so column 16q + j of
// the run is the mmas' k-slot 4q + j (j < 4) or 16 + 4q + j - 4 (j < 8) of
// the first and the same of j - 8 in the second, in A and B alike. d as in
// mma_e4m3_16832: row g (d0, d1) / g + 8 (d2, d3) of A by columns 2q, 2q + 1
// of B (rows of B^T).
__device__ __forceinline__ void mma_e4m3_k64(float (&d)[4], const uint4& lo, const uint4& hi,
                                             const uint4& b) {
  mma_e4m3_16832(d, lo.x, hi.x, lo.y, hi.y, b.x, b.y);
  mma_e4m3_16832(d, lo.z, hi.z, lo.w, hi.w, b.z, b.w);
}

}  // namespace pagoda::cuda
